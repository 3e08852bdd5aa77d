"""tapegrad.nn.functional: the engine's fused ops under torch.nn.functional's names."""
import math

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


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    """softmax(query key^T * scale + mask) value over the last two dims, scale 1/sqrt(E) by
    default, as torch 2's: a bool attn_mask is True where a query MAY attend (the opposite of
    MultiheadAttention's masks), a float one is added to the scores; is_causal blocks each
    query's later keys. Written in the engine's ops (matmul, masked_fill, softmax, dropout),
    so every derivative is theirs; a row with every key blocked is NaN, as in PyTorch."""
    import tapegrad as tg
    L, S = query.shape[-2], key.shape[-2]
    s = scale if scale is not None else 1 / math.sqrt(query.shape[-1])
    scores = (query @ key.transpose(-2, -1)) * s
    if is_causal:
        scores = scores.masked_fill(tg.arange(S).unsqueeze(0) > tg.arange(L).unsqueeze(1),
                                    -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == tg.bool:
            scores = scores.masked_fill(attn_mask == 0, -math.inf)
        else:
            scores = scores + attn_mask
    weights = scores.softmax(-1)
    if dropout_p > 0:
        weights = dropout(weights, dropout_p)
    return weights @ value
