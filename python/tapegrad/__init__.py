"""tapegrad: a tape-based reverse-mode autograd engine in C++, with PyTorch's names.

    import tapegrad as tg
    x = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (x * x).sum().backward()
    x.grad            # tensor([[2., 4.], [6., 8.]])

Tensors, their ops, autograd and gradcheck are the C++ engine (tapegrad._C); this package
gives them PyTorch's Python face. Where tapegrad differs from PyTorch, the docstring says so.
"""
import contextlib

import numpy as _np

from tapegrad import _C
from tapegrad._C import Error, Tensor, dtype, manual_seed, is_grad_enabled, matmul, cat, where

float32 = dtype.float32
float64 = dtype.float64
int64 = dtype.int64
bool = dtype.bool  # noqa: A001, as torch.bool
float = float32  # noqa: A001
double = float64
long = int64

from tapegrad import autograd, metrics, nn, optim, safetensors, viz  # noqa: E402
from tapegrad._format import tensor_repr  # noqa: E402

Tensor.__repr__ = tensor_repr  # PyTorch's format; str() too
Tensor.__str__ = tensor_repr


class Size(tuple):
    """A tensor's shape, a tuple that prints as torch.Size does: tapegrad.Size([30, 200, 512])."""

    def __repr__(self):
        return f"tapegrad.Size({list(self)})"

    def numel(self):
        n = 1
        for d in self:
            n *= d
        return n


def _shape(t, _dims=Tensor.shape):
    return Size(_dims.__get__(t))


def _size(t, dim=None, _cpp_size=Tensor.size):
    return Size(_cpp_size(t)) if dim is None else _cpp_size(t, dim)


Tensor.shape = property(_shape)
Tensor.size = _size
from tapegrad._C import ClassifierRun, LanguageModelRun, Translator  # noqa: E402

__all__ = ["Tensor", "Size", "Error", "tensor", "zeros", "ones", "full", "zeros_like", "ones_like",
           "rand", "randn", "randint", "arange", "manual_seed", "no_grad", "enable_grad",
           "is_grad_enabled", "matmul", "cat", "where", "float32", "float64", "int64", "bool",
           "autograd", "metrics", "nn", "optim", "viz", "load_run", "Translator", "LanguageModelRun",
           "ClassifierRun"]


def _cpu(device):
    """tapegrad's tensors are CPU tensors: device None or "cpu" is accepted, another refused."""
    if device is not None and str(device) not in ("cpu", "cpu:0"):
        raise ValueError(f"tapegrad computes on the CPU only, not on '{device}'")


def _to(t, *args, dtype=None, device=None):
    """to(dtype) converts; to("cpu") is the tensor itself (tapegrad has no other device)."""
    for a in args:
        if isinstance(a, _C.dtype):
            dtype = a
        else:
            device = a
    _cpu(device)
    return t if dtype is None or dtype == t.dtype else _cpp_to(t, dtype)


_cpp_to = Tensor.to
Tensor.to = _to


def load_run(dir, checkpoint="best"):
    """The model of a run folder that `train` (translation or --task lm) or `classify` wrote,
    at one of its checkpoints ("best", "latest" or a step), as its program loads it: a
    Translator (.translate(sources, beam=1)), a LanguageModelRun (.sample(prompts,
    max_new_tokens=100, temperature=1.0, top_k=0, top_p=1.0, greedy=False, seed=0)) or a
    ClassifierRun (.classify(texts), .predict(texts) with probabilities). run.model is its
    model as an nn.Module, in eval mode."""
    run = _C.load_run(str(dir), checkpoint)
    kinds = {_C._MiniTransformer: nn.MiniTransformer, _C._LanguageModel: nn.LanguageModel,
             _C._SequenceClassifier: nn.SequenceClassifier, _C._TokenClassifier: nn.TokenClassifier}
    run.model = kinds[type(run._model)]._wrap(run._model).eval()
    return run


def _as_shape(size):
    if len(size) == 1 and not isinstance(size[0], int):
        return tuple(size[0])
    return tuple(size)


def tensor(data, dtype=None, requires_grad=False, device=None):
    _cpu(device)
    """A new tensor holding a copy of `data` (a number, nested lists, a numpy array or a
    tensor). As in PyTorch, Python floats give float32, ints int64 and bools bool, and a numpy
    array keeps its dtype (float16 and smaller integer types are widened)."""
    if isinstance(data, Tensor):
        t = data.detach().clone()
    else:
        try:
            array = _np.asarray(data)
        except ValueError as e:  # a ragged nesting
            raise TypeError(f"tapegrad.tensor: {e}") from None
        if array.dtype == object or array.dtype.kind in "USV":
            raise TypeError("tapegrad.tensor: expected numbers, nested lists of them or an array")
        chosen = dtype
        if chosen is None:
            if isinstance(data, _np.ndarray):
                chosen = _C._numpy_dtype(array.dtype)
            else:
                kind = array.dtype.kind
                chosen = bool_ if kind == "b" else int64 if kind in "iu" else float32
        t = _C._from_numpy(array, chosen)
    if dtype is not None and t.dtype != dtype:
        t = t.to(dtype)
    if requires_grad:
        t.requires_grad = True
    return t


bool_ = dtype.bool


def zeros(*size, dtype=float32, requires_grad=False, device=None):
    _cpu(device)
    return _C.zeros(_as_shape(size), dtype).requires_grad_(requires_grad)


def ones(*size, dtype=float32, requires_grad=False, device=None):
    _cpu(device)
    return _C.ones(_as_shape(size), dtype).requires_grad_(requires_grad)


def full(size, fill_value, dtype=None, requires_grad=False, device=None):
    _cpu(device)
    if dtype is None:
        dtype = int64 if isinstance(fill_value, int) and not isinstance(fill_value, type(True)) \
            else float32
    return _C.full(tuple(size), fill_value, dtype).requires_grad_(requires_grad)


def zeros_like(t, dtype=None, device=None):
    _cpu(device)
    return _C.zeros(t.shape, dtype or t.dtype)


def ones_like(t, dtype=None, device=None):
    _cpu(device)
    return _C.ones(t.shape, dtype or t.dtype)


def rand(*size, dtype=float32, requires_grad=False, device=None):
    _cpu(device)
    """Uniform in [0, 1) from the default generator (manual_seed); tapegrad's own stream, so
    the numbers differ from PyTorch's for the same seed."""
    return _C.rand(_as_shape(size), dtype).requires_grad_(requires_grad)


def randn(*size, dtype=float32, requires_grad=False, device=None):
    _cpu(device)
    """Standard normal from the default generator (manual_seed); the numbers differ from
    PyTorch's for the same seed."""
    return _C.randn(_as_shape(size), dtype).requires_grad_(requires_grad)


def randint(low, high=None, size=(), dtype=int64, device=None):
    _cpu(device)
    if high is None:
        low, high = 0, low
    t = _C.randint(low, high, tuple(size))
    return t if dtype == int64 else t.to(dtype)


def arange(start, end=None, step=1, dtype=None, device=None):
    _cpu(device)
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = int64 if all(isinstance(v, int) for v in (start, end, step)) else float32
    return _C.arange(start, end, step, dtype)


class _GradMode(contextlib.ContextDecorator):
    def __init__(self, enabled):
        self.enabled = enabled

    def __enter__(self):
        self.previous = is_grad_enabled()
        _C._set_grad_enabled(self.enabled)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.previous)
        return False


def no_grad():
    """Records nothing inside (a context manager or a decorator), as torch.no_grad."""
    return _GradMode(False)


def enable_grad():
    return _GradMode(True)


def _method(name):
    def call(x, *args, **kwargs):
        return getattr(x, name)(*args, **kwargs)
    call.__name__ = name
    return call


for _name in ["exp", "log", "sqrt", "tanh", "relu", "sin", "cos", "sum", "mean", "softmax",
              "log_softmax", "reshape", "transpose", "permute", "unsqueeze", "squeeze",
              "masked_fill", "argmax", "tril", "triu", "chunk", "split"]:
    globals()[_name] = _method(_name)
    __all__.append(_name)


def pow(input, exponent):  # noqa: A001, as torch.pow
    """input ** exponent, either a tensor: torch.pow(10000, t) is 10000 ** t."""
    return input ** exponent


def floor_divide(input, other):
    return input // other


__all__ += ["pow", "floor_divide"]
