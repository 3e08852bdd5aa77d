"""tapegrad.nn.functional: the engine's fused ops under torch.nn.functional's names."""
from tapegrad import _C


def linear(input, weight, bias=None):
    return _C.linear(input, weight, bias)


def relu(input):
    return input.relu()


def gelu(input):
    """GELU with erf, as PyTorch's default (approximate='none')."""
    return _C.gelu(input)


def softmax(input, dim):
    return input.softmax(dim)


def log_softmax(input, dim):
    return input.log_softmax(dim)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Over the last dim only: normalized_shape must be (input.shape[-1],)."""
    if tuple(normalized_shape) != (input.shape[-1],):
        raise ValueError("tapegrad: layer_norm normalizes over the last dim only")
    import tapegrad as tg
    C = input.shape[-1]
    weight = weight if weight is not None else tg.ones(C, dtype=input.dtype)
    bias = bias if bias is not None else tg.zeros(C, dtype=input.dtype)
    return _C.layer_norm(input, weight, bias, eps)


def embedding(input, weight, padding_idx=None):
    return _C.embedding(input, weight, padding_idx)


def dropout(input, p=0.5, training=True):
    return _C.dropout(input, p, training)


def cross_entropy(input, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """input [N, C] logits, target [N] class ids: the mean over the rows not ignored.
    tapegrad differs: only reduction='mean', and when every target is ignored the loss is 0
    (PyTorch gives NaN)."""
    if reduction != "mean":
        raise ValueError("tapegrad: cross_entropy's reduction is 'mean' only")
    return _C.cross_entropy(input, target, ignore_index, label_smoothing)
