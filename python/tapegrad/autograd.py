"""tapegrad.autograd: grad(), custom ops (Function) and the gradient checks, as
torch.autograd has them."""
import tapegrad as _tg
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


class FunctionCtx:
    """What forward leaves for backward: save_for_backward(*tensors), then saved_tensors."""

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


class Function:
    """A custom op written in Python, as torch.autograd.Function: subclass it with static
    forward(ctx, *args) and backward(ctx, grad_output) (one gradient, or None, per argument
    of forward), and call Sub.apply(*args). forward runs with recording off; its output joins
    the tape as one op whose derivative is backward, which runs with recording on under
    create_graph, so a backward written in tapegrad's ops has higher derivatives too.
    tapegrad differs: forward returns one tensor, and saving the output itself makes a cycle
    that is never freed (save an input, or out.detach())."""

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args):
        ctx = FunctionCtx()
        with _tg.no_grad():
            out = cls.forward(ctx, *args)
        positions = [i for i, a in enumerate(args) if isinstance(a, _tg.Tensor)]
        inputs = [args[i] for i in positions]
        if not (_tg.is_grad_enabled() and any(t.requires_grad for t in inputs)):
            return out

        def backward(grad_output):
            grads = cls.backward(ctx, grad_output)
            grads = grads if isinstance(grads, tuple) else (grads,)
            if len(grads) != len(args):
                raise TypeError(f"{cls.__name__}.backward returned {len(grads)} gradients for "
                                f"{len(args)} arguments of forward")
            return tuple(grads[i] for i in positions)
        return _C._record(cls.__name__, inputs, out, backward)
