"""The seed's transformer modules written once against a library's names (torch, or tapegrad
with PyTorch's names), for the benchmarks that run the same Python source on both:
compare_pytorch.py (PyTorch's side of every encoder and MiniTransformer workload) and
python_side_by_side.py (both sides)."""
import math
import types


def seed_modules(lib):
    """The seed's modules, post-norm, written against lib (torch or tapegrad): MHA, FF,
    EncLayer, DecLayer and Mini, the encoder-decoder."""
    nn, F = lib.nn, lib.nn.functional

    class MHA(nn.Module):
        def __init__(self, C, H, p):
            super().__init__()
            self.H, self.D = H, C // H
            self.q_proj, self.k_proj = nn.Linear(C, C), nn.Linear(C, C)
            self.v_proj, self.out_proj = nn.Linear(C, C), nn.Linear(C, C)
            self.dropout = nn.Dropout(p)

        def forward(self, q, k, v, key_padding=None, attn_mask=None):
            B, T, C = q.shape
            S = k.shape[1]
            q = self.q_proj(q).view(B, T, self.H, self.D).transpose(1, 2)
            k = self.k_proj(k).view(B, S, self.H, self.D).transpose(1, 2)
            v = self.v_proj(v).view(B, S, self.H, self.D).transpose(1, 2)
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.D)
            if key_padding is not None:
                scores = scores.masked_fill(key_padding[:, None, None, :], float("-inf"))
            if attn_mask is not None:
                scores = scores.masked_fill(attn_mask, float("-inf"))
            ctx = self.dropout(F.softmax(scores, -1)) @ v
            return self.out_proj(ctx.transpose(1, 2).reshape(B, T, C))

    class FF(nn.Module):
        def __init__(self, C, Fd, p):
            super().__init__()
            self.linear1, self.linear2 = nn.Linear(C, Fd), nn.Linear(Fd, C)
            self.dropout = nn.Dropout(p)

        def forward(self, x):
            return self.linear2(self.dropout(F.relu(self.linear1(x))))

    class EncLayer(nn.Module):
        def __init__(self, C, H, Fd, p):
            super().__init__()
            self.self_attn, self.ff = MHA(C, H, p), FF(C, Fd, p)
            self.norm1, self.norm2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.d1, self.d2 = nn.Dropout(p), nn.Dropout(p)

        def forward(self, x, pad=None):
            x = self.norm1(x + self.d1(self.self_attn(x, x, x, pad)))
            return self.norm2(x + self.d2(self.ff(x)))

    class DecLayer(nn.Module):
        def __init__(self, C, H, Fd, p):
            super().__init__()
            self.self_attn, self.cross_attn, self.ff = MHA(C, H, p), MHA(C, H, p), FF(C, Fd, p)
            self.norm1, self.norm2, self.norm3 = nn.LayerNorm(C), nn.LayerNorm(C), nn.LayerNorm(C)
            self.d1, self.d2, self.d3 = nn.Dropout(p), nn.Dropout(p), nn.Dropout(p)

        def forward(self, x, mem, causal, tpad, spad):
            x = self.norm1(x + self.d1(self.self_attn(x, x, x, tpad, causal)))
            x = self.norm2(x + self.d2(self.cross_attn(x, mem, mem, spad)))
            return self.norm3(x + self.d3(self.ff(x)))

    class Mini(nn.Module):
        def __init__(self, V, C, H, Fd, L, max_len, p=0.1):
            super().__init__()
            self.C = C
            self.src_embed = nn.Embedding(V, C, padding_idx=0)
            self.tgt_embed = nn.Embedding(V, C, padding_idx=0)
            pos = lib.arange(max_len)[:, None]
            i = lib.arange(C)[None, :]
            angle = pos / lib.pow(10000, (2 * (i // 2)) / C)
            self.register_buffer("pe", lib.where(i % 2 == 0, lib.sin(angle), lib.cos(angle)))
            self.drop = nn.Dropout(p)
            self.enc = nn.ModuleList([EncLayer(C, H, Fd, p) for _ in range(L)])
            self.dec = nn.ModuleList([DecLayer(C, H, Fd, p) for _ in range(L)])
            self.out_proj = nn.Linear(C, V)

        def embed(self, table, ids):
            return self.drop(table(ids) * math.sqrt(self.C) + self.pe[: ids.shape[1]])

        def forward(self, src, tgt):
            spad, tpad = src == 0, tgt == 0
            T = tgt.shape[1]
            causal = lib.triu(lib.ones(T, T, dtype=lib.bool), 1)
            m = self.embed(self.src_embed, src)
            for layer in self.enc:
                m = layer(m, spad)
            x = self.embed(self.tgt_embed, tgt)
            for layer in self.dec:
                x = layer(x, m, causal, tpad, spad)
            return self.out_proj(x)

    return types.SimpleNamespace(MHA=MHA, FF=FF, EncLayer=EncLayer, DecLayer=DecLayer, Mini=Mini)
