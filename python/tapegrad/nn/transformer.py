"""torch.nn's attention and encoder modules over tapegrad's ops: MultiheadAttention (with
PyTorch's parameter names and layout, so a torch state dict loads), TransformerEncoderLayer
and TransformerEncoder. Masks are PyTorch's: a bool mask is True where a position is BLOCKED,
a float mask is added to the scores."""
import copy
import math

import tapegrad as _tg
from tapegrad import _C
from tapegrad.nn import functional as F
from tapegrad.nn.modules import Dropout, LayerNorm, Linear, Module, ModuleList, Parameter


def _xavier_uniform(rows, cols):
    bound = math.sqrt(6 / (rows + cols))
    return _tg.rand(rows, cols) * (2 * bound) - bound


class MultiheadAttention(Module):
    """Vaswani et al.'s multi-head attention, as torch.nn.MultiheadAttention: in_proj_weight
    [3E, E] and in_proj_bias [3E] project query, key and value; out_proj the heads' concatenation.
    Inputs are [L, B, E] ([B, L, E] with batch_first). forward returns (output, weights):
    weights [B, L, S] averaged over heads (or [B, H, L, S]) when need_weights, else None.

    Without weights to return and with bool masks, attention is the engine's fused kernel
    (tapegrad._C.attention); otherwise it is written in ops. tapegrad differs: a query whose
    every key is blocked gets zero output from the fused kernel (PyTorch gives NaN)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.batch_first = batch_first
        self.in_proj_weight = Parameter(_xavier_uniform(3 * embed_dim, embed_dim))
        self.in_proj_bias = Parameter(_tg.zeros(3 * embed_dim)) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        if bias:
            with _tg.no_grad():
                self.out_proj.bias[:] = 0

    def _project(self, query, key, value):
        w, b, E = self.in_proj_weight, self.in_proj_bias, self.embed_dim
        if query is key and key is value:  # self-attention: one product, split after
            return F.linear(query, w, b).chunk(3, -1)
        return tuple(F.linear(x, w[i * E:(i + 1) * E], None if b is None else b[i * E:(i + 1) * E])
                     for i, x in enumerate((query, key, value)))

    def _blocked(self, B, L, S, key_padding_mask, attn_mask):
        """The masks as one bool [B or 1, H or 1, L, S] of blocked positions, or a float one to
        add to the scores."""
        masks = []
        if key_padding_mask is not None:
            masks.append(key_padding_mask.reshape(B, 1, 1, S))
        if attn_mask is not None:
            masks.append(attn_mask.reshape(-1, self.num_heads, L, S) if attn_mask.dim() == 3
                         else attn_mask.reshape(1, 1, L, S))
        if not masks:
            return None
        if any(m.dtype != _tg.bool for m in masks):  # added to the scores
            return sum(_tg.zeros(*m.shape).masked_fill(m, -math.inf) if m.dtype == _tg.bool
                       else m for m in masks)
        return masks[0] if len(masks) == 1 else _C.logical_or(*masks)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True):
        if not self.batch_first:
            same = query is key and key is value
            query = query.transpose(0, 1)
            key, value = (query, query) if same else (key.transpose(0, 1), value.transpose(0, 1))
        B, L, S, H = query.shape[0], query.shape[1], key.shape[1], self.num_heads
        q, k, v = self._project(query, key, value)
        mask = self._blocked(B, L, S, key_padding_mask, attn_mask)
        p = self.dropout if self.training else 0.0
        weights = None
        if not need_weights and (mask is None or mask.dtype == _tg.bool):
            out = _C.attention(q, k, v, H, mask, p, self.training)
        else:
            heads = [x.reshape(B, -1, H, self.embed_dim // H).transpose(1, 2) for x in (q, k, v)]
            scores = heads[0] @ heads[1].transpose(-2, -1) * (1 / math.sqrt(self.embed_dim // H))
            if mask is not None:
                scores = scores.masked_fill(mask, -math.inf) if mask.dtype == _tg.bool \
                    else scores + mask
            weights = scores.softmax(-1)
            out = (F.dropout(weights, p, self.training) @ heads[2]).transpose(1, 2) \
                .reshape(B, L, self.embed_dim)
            if average_attn_weights:
                weights = weights.mean(1)
        out = self.out_proj(out)
        return (out if self.batch_first else out.transpose(0, 1)), weights


class TransformerEncoderLayer(Module):
    """torch.nn.TransformerEncoderLayer: self-attention and a feed-forward block, each a residual
    sublayer with dropout, the norm after the residual sum (post-norm, the paper's) or, with
    norm_first, before the sublayer (pre-norm)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = {"relu": F.relu, "gelu": F.gelu}.get(activation, activation)

    def _attend(self, x, attn_mask, key_padding_mask):
        out, _ = self.self_attn(x, x, x, key_padding_mask=key_padding_mask, need_weights=False,
                                attn_mask=attn_mask)
        return self.dropout1(out)

    def _feed_forward(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        x = src
        if self.norm_first:
            x = x + self._attend(self.norm1(x), src_mask, src_key_padding_mask)
            return x + self._feed_forward(self.norm2(x))
        x = self.norm1(x + self._attend(x, src_mask, src_key_padding_mask))
        return self.norm2(x + self._feed_forward(x))


class TransformerEncoder(Module):
    """num_layers copies of encoder_layer, applied in turn, then an optional norm, as
    torch.nn.TransformerEncoder (parameters layers.0.self_attn.in_proj_weight and so on)."""

    def __init__(self, encoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return self.norm(x) if self.norm is not None else x
