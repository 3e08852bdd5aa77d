"""tapegrad.autograd: grad() and the gradient checks, as torch.autograd has them."""
from tapegrad import _C


def _list(x):
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """The gradients of sum(outputs[k] * grad_outputs[k]) with respect to each input, as a
    tuple in the inputs' order; no tensor's .grad changes. retain_graph defaults to
    create_graph, as in PyTorch; an input the outputs do not use is an error unless
    allow_unused, and then None."""
    retain = create_graph if retain_graph is None else retain_graph
    got = _C._grad(_list(outputs), _list(inputs), _list(grad_outputs), retain, create_graph,
                   allow_unused)
    return tuple(got)


def _check(checker, func, inputs, eps, atol, rtol, raise_exception):
    inputs = _list(inputs)
    result = checker(lambda *xs: func(*xs), inputs, eps, atol, rtol)
    if not result.ok and raise_exception:
        raise _C.Error(result.message())
    return result.ok


def gradcheck(func, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Compares the gradients backward gives func (a callable of tensors returning one tensor)
    with central finite differences, as torch.autograd.gradcheck does; inputs in float64. On a
    failure it raises tapegrad.Error naming the worst element ("input 1[3]: ..."), or returns
    False when raise_exception is False."""
    return _check(_C._gradcheck, func, inputs, eps, atol, rtol, raise_exception)


def gradgradcheck(func, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """gradcheck of func's gradients: its second derivatives against finite differences."""
    return _check(_C._gradgradcheck, func, inputs, eps, atol, rtol, raise_exception)
