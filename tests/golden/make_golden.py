#!/usr/bin/python3
"""Computes the golden numbers tapegrad's whole-model tests compare with (tests/nn/test_golden.cpp).

    cmake --build build --target golden_export && ./build/tests/golden_export /tmp/golden
    /usr/bin/python3 tests/golden/make_golden.py /tmp/golden tests/golden

For each case, reads the weights tapegrad drew (<case>.weights.safetensors), runs the module
here in float64, written from "Attention Is All You Need" (and, for the language model "lm",
GPT-2's layout) with nothing but tensor algebra (no torch.nn.Transformer*, no
nn.MultiheadAttention, no fused attention, no F.cross_entropy), and writes
tests/golden/<case>.safetensors holding:
  param.<name>          the weights, as read
  input.<name>          the inputs (padded batches of unequal lengths; the language model's
                        token blocks, and the batches and learning rates of its AdamW steps)
  expect.<name>         outputs: the stack's output or the model's logits, losses, the Adam
                        loss trajectory (the language model's: PyTorch's own AdamW and
                        clip_grad_norm_, in float64 and float32), greedy decodes
  grad.<name>           the gradient of expect.loss (stacks, language model) or
                        expect.loss_smoothed (MiniTransformer) with respect to every parameter
                        and, for the stacks, every input
The conventions written here are tapegrad's, each stated where it is used: masks are true where
blocked, a query with every key blocked gets zero weights, token embeddings are scaled by
sqrt(d_model), LayerNorm's eps is 1e-5, pre-norm stacks end in a LayerNorm.
Needs Debian's python3-torch; the test suite never runs this.
"""
import json
import math
import struct
import sys

import torch

torch.set_default_dtype(torch.float64)

DTYPES = {"F64": torch.float64, "F32": torch.float32, "I64": torch.int64, "BOOL": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    tensors = {}
    for name, h in header.items():
        b, e = h["data_offsets"]
        raw = bytearray(body[b:e])
        t = torch.frombuffer(raw, dtype=DTYPES[h["dtype"]]) if raw else torch.empty(0, dtype=DTYPES[h["dtype"]])
        tensors[name] = t.reshape(h["shape"]).clone()
    return tensors, meta


def write_safetensors(path, tensors, meta):
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = t.numpy().tobytes()
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


# ---- the model, from the paper ------------------------------------------------------------

def linear(P, name, x):
    return x @ P[name + ".weight"].T + P[name + ".bias"]


def layer_norm(P, name, x, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased, as in the LayerNorm paper
    return (x - mean) / torch.sqrt(var + eps) * P[name + ".weight"] + P[name + ".bias"]


def attention(P, name, q_in, kv_in, heads, blocked):
    """Multi-head attention, section 3.2.2. blocked: bool broadcastable to [B, H, T, S]."""
    B, T, C = q_in.shape
    S = kv_in.shape[1]
    D = C // heads
    q = linear(P, name + ".q_proj", q_in).reshape(B, T, heads, D).transpose(1, 2)
    k = linear(P, name + ".k_proj", kv_in).reshape(B, S, heads, D).transpose(1, 2)
    v = linear(P, name + ".v_proj", kv_in).reshape(B, S, heads, D).transpose(1, 2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    if blocked is not None:
        blocked = blocked.expand(B, heads, T, S)
        scores = scores.masked_fill(blocked, -math.inf)
        # a query with every key blocked attends to nothing: zero weights (not NaN)
        everything = blocked.all(-1, keepdim=True)
        scores = scores.masked_fill(everything, 0.0)
        weights = torch.softmax(scores, -1).masked_fill(everything, 0.0)
    else:
        weights = torch.softmax(scores, -1)
    out = (weights @ v).transpose(1, 2).reshape(B, T, C)
    return linear(P, name + ".out_proj", out)


def activation(name, x):
    if name == "relu":
        return torch.clamp(x, min=0)
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))  # exact GELU


def feed_forward(P, name, x, act):
    return linear(P, name + ".linear2", activation(act, linear(P, name + ".linear1", x)))


def either_blocked(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def encoder_layer(P, name, x, pad_blocked, cfg):
    H, act = cfg["heads"], cfg["activation"]
    if cfg["norm_first"]:
        n = layer_norm(P, name + ".norm1", x)
        x = x + attention(P, name + ".self_attn", n, n, H, pad_blocked)
        return x + feed_forward(P, name + ".feed_forward", layer_norm(P, name + ".norm2", x), act)
    x = layer_norm(P, name + ".norm1", x + attention(P, name + ".self_attn", x, x, H, pad_blocked))
    return layer_norm(P, name + ".norm2", x + feed_forward(P, name + ".feed_forward", x, act))


def decoder_layer(P, name, x, memory, self_blocked, cross_blocked, cfg):
    H, act = cfg["heads"], cfg["activation"]
    if cfg["norm_first"]:
        n = layer_norm(P, name + ".norm1", x)
        x = x + attention(P, name + ".self_attn", n, n, H, self_blocked)
        x = x + attention(P, name + ".cross_attn", layer_norm(P, name + ".norm2", x), memory, H,
                          cross_blocked)
        return x + feed_forward(P, name + ".feed_forward", layer_norm(P, name + ".norm3", x), act)
    x = layer_norm(P, name + ".norm1", x + attention(P, name + ".self_attn", x, x, H, self_blocked))
    x = layer_norm(P, name + ".norm2",
                   x + attention(P, name + ".cross_attn", x, memory, H, cross_blocked))
    return layer_norm(P, name + ".norm3", x + feed_forward(P, name + ".feed_forward", x, act))


def key_padding(padding):  # [B, S] true at padding -> [B, 1, 1, S]
    return padding[:, None, None, :]


def causal(T):  # [T, T], true where a query would see a later key
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


def encoder(P, prefix, x, padding, cfg):
    for i in range(cfg["layers"]):
        x = encoder_layer(P, f"{prefix}layers.{i}", x, key_padding(padding), cfg)
    return layer_norm(P, prefix + "norm", x) if cfg["norm_first"] else x


def decoder(P, prefix, y, memory, tgt_padding, memory_padding, cfg):
    self_blocked = either_blocked(key_padding(tgt_padding), causal(y.shape[1]))
    for i in range(cfg["layers"]):
        y = decoder_layer(P, f"{prefix}layers.{i}", y, memory, self_blocked,
                          key_padding(memory_padding), cfg)
    return layer_norm(P, prefix + "norm", y) if cfg["norm_first"] else y


def positional_table(max_len, C):
    """Section 3.5, rounded to float32 as tapegrad stores it."""
    pe = torch.zeros(max_len, C)
    for pos in range(max_len):
        for i in range(C):
            angle = pos * 10000.0 ** (-(i - i % 2) / C)
            pe[pos, i] = math.sin(angle) if i % 2 == 0 else math.cos(angle)
    return pe.float().double()


def embed(P, table, ids, pad_id, pe):
    """Section 3.4: embedding * sqrt(d_model), plus the positions. The pad row gets no gradient."""
    W = P[table]
    rows = W[ids]
    rows = torch.where((ids == pad_id)[..., None], rows.detach(), rows)
    return rows * math.sqrt(W.shape[1]) + pe[: ids.shape[1]]


def mini_logits(P, src, tgt_in, cfg, pe):
    pad = cfg["pad_id"]
    tgt_table = "src_embed.weight" if cfg["share_embeddings"] else "tgt_embed.weight"
    memory = encoder(P, "encoder.", embed(P, "src_embed.weight", src, pad, pe), src == pad, cfg)
    y = decoder(P, "decoder.", embed(P, tgt_table, tgt_in, pad, pe), memory, tgt_in == pad,
                src == pad, cfg)
    if cfg["tie_output"]:
        return y @ P[tgt_table].T + P["out_bias"]
    return linear(P, "out_proj", y)


def cross_entropy(logits, targets, ignore_index, smoothing):
    """Mean over non-ignored rows of -sum_c q_c log p_c, q = (1 - eps) one-hot + eps / V."""
    V = logits.shape[-1]
    logp = torch.log_softmax(logits.reshape(-1, V), -1)
    t = targets.reshape(-1)
    keep = t != ignore_index
    q = torch.full_like(logp, smoothing / V)
    q[torch.arange(len(t)), t.clamp(min=0)] += 1 - smoothing
    rows = -(q * logp).sum(-1)
    return rows[keep].sum() / keep.sum()


def adam_trajectory(P, loss_fn, steps, lr, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma and Ba, with PyTorch's placement of eps): the loss before each step."""
    params = {k: v.detach().clone().requires_grad_(True) for k, v in P.items() if v.requires_grad}
    m = {k: torch.zeros_like(v) for k, v in params.items()}
    v2 = {k: torch.zeros_like(v) for k, v in params.items()}
    losses = []
    for t in range(1, steps + 1):
        Q = dict(P)
        Q.update(params)
        loss = loss_fn(Q)
        losses.append(loss.item())
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            for (k, p), g in zip(params.items(), grads):
                m[k] = b1 * m[k] + (1 - b1) * g
                v2[k] = b2 * v2[k] + (1 - b2) * g * g
                step = lr / (1 - b1 ** t)
                p -= step * m[k] / (torch.sqrt(v2[k]) / math.sqrt(1 - b2 ** t) + eps)
    return losses


def greedy(P, src, cfg, pe, max_len, bos, eos):
    """Greedy decoding by full recomputation: tokens without <bos> and <eos>, up to max_len."""
    out = []
    for b in range(src.shape[0]):
        tokens = []
        for _ in range(max_len):
            tgt = torch.tensor([[bos] + tokens])
            nxt = int(mini_logits(P, src[b:b + 1], tgt, cfg, pe)[0, -1].argmax())
            if nxt == eos:
                break
            tokens.append(nxt)
        out.append(tokens)
    return out


# ---- the decoder-only language model (GPT-2's layout) -------------------------------------

def lm_logits(P, ids, cfg):
    """Token plus learned position embeddings, pre-norm layers under the causal mask, a final
    LayerNorm, and the output projection tied to the token embedding (no bias)."""
    W = P["tok_embed.weight"]
    x = W[ids] + P["pos_embed.weight"][: ids.shape[1]]
    blocked = causal(ids.shape[1])
    for i in range(cfg["layers"]):
        x = encoder_layer(P, f"layers.{i}", x, blocked, cfg)
    return layer_norm(P, "norm", x) @ W.T


def lm_loss(P, ids, targets, cfg):
    return cross_entropy(lm_logits(P, ids, cfg), targets, -1, 0.0)


def lm_greedy(P, prompt, cfg, block, n):
    """n tokens, each the argmax after the last `block` tokens of the context (nanoGPT's crop)."""
    context = list(prompt)
    for _ in range(n):
        window = torch.tensor([context[-block:]])
        context.append(int(lm_logits(P, window, cfg)[0, -1].argmax()))
    return context[len(prompt):]


def lm_adamw_trajectory(P, xs, ys, lrs, cfg, dtype):
    """PyTorch's own AdamW (weight decay 0.1, betas 0.9 and 0.99) and clip_grad_norm_ (1.0),
    the nanoGPT recipe's, on the batches xs, ys with the learning rate lrs[t] at step t: the loss
    before each step, computed in `dtype`."""
    params = {k: v.detach().to(dtype).clone().requires_grad_(True) for k, v in P.items()}
    opt = torch.optim.AdamW(params.values(), lr=1.0, betas=(0.9, 0.99), weight_decay=0.1)
    losses = []
    for x, y, lr in zip(xs, ys, lrs):
        for group in opt.param_groups:
            group["lr"] = float(lr)
        opt.zero_grad()
        loss = lm_loss(params, x, y, cfg)
        losses.append(loss.item())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
        opt.step()
    return losses


def lm_case(P, weights, meta, cfg, g):
    V, block = int(meta["vocab"]), int(meta["block_size"])
    ids = torch.randint(0, V, (3, block), generator=g)
    targets = torch.randint(0, V, (3, block), generator=g)
    logits = lm_logits(P, ids, cfg)
    loss = cross_entropy(logits, targets, -1, 0.0)
    grads = torch.autograd.grad(loss, list(P.values()))
    out = {f"grad.{k}": gr for k, gr in zip(P, grads)}
    steps = 50
    xs = torch.randint(0, V, (steps, 4, block), generator=g)
    ys = torch.randint(0, V, (steps, 4, block), generator=g)
    lrs = torch.tensor([1e-2 * min(1.0, (t + 1) / 10) for t in range(steps)])
    prompt = torch.randint(0, V, (3,), generator=g)
    out.update({"input.ids": ids, "input.targets": targets, "input.prompt": prompt,
                "input.train_x": xs, "input.train_y": ys, "input.lrs": lrs,
                "expect.logits": logits.detach(), "expect.loss": loss.detach().reshape(1),
                "expect.greedy": torch.tensor(lm_greedy(P, prompt.tolist(), cfg, block, 12)),
                "expect.adamw_losses": torch.tensor(
                    lm_adamw_trajectory(P, xs, ys, lrs, cfg, torch.float64)),
                "expect.adamw_losses_f32": torch.tensor(
                    lm_adamw_trajectory(P, xs, ys, lrs, cfg, torch.float32))})
    return out


# ---- the cases ----------------------------------------------------------------------------

def padded_ids(lengths, L, vocab, pad, g, low):
    ids = torch.full((len(lengths), L), pad, dtype=torch.int64)
    for b, n in enumerate(lengths):
        ids[b, :n] = torch.randint(low, vocab, (n,), generator=g)
    return ids


def padding_of(lengths, L):
    return torch.arange(L)[None, :] >= torch.tensor(lengths)[:, None]


def main(weights_dir, out_dir):
    for name in ["encoder_post", "encoder_pre", "decoder_post", "decoder_pre", "mini_post",
                 "mini_pre", "lm"]:
        weights, meta = read_safetensors(f"{weights_dir}/{name}.weights.safetensors")
        cfg = {"heads": int(meta["heads"]), "layers": int(meta["layers"]),
               "norm_first": meta["norm_first"] == "true", "activation": meta["activation"]}
        C = int(meta["d_model"])
        P = {k: v.double().requires_grad_(v.dtype == torch.float64 and not k.endswith(".pe"))
             for k, v in weights.items()}
        g = torch.Generator().manual_seed(sum(map(ord, name)))
        out = {f"param.{k}": v.detach() for k, v in weights.items()}
        if meta["kind"] == "lm":
            out.update(lm_case(P, weights, meta, cfg, g))
        elif meta["kind"] in ("encoder", "decoder"):
            B, S, T = 3, 6, 5
            src_len, tgt_len = [6, 4, 1], [5, 3, 2]
            x = torch.randn(B, T if meta["kind"] == "decoder" else S, C, generator=g)
            x.requires_grad_(True)
            inputs = {"x": x}
            if meta["kind"] == "encoder":
                padding = padding_of(src_len, S)
                y = encoder(P, "", x, padding, cfg)
                out["input.padding"] = padding
            else:
                memory = torch.randn(B, S, C, generator=g).requires_grad_(True)
                inputs["memory"] = memory
                tgt_padding, memory_padding = padding_of(tgt_len, T), padding_of(src_len, S)
                y = decoder(P, "", x, memory, tgt_padding, memory_padding, cfg)
                out["input.tgt_padding"] = tgt_padding
                out["input.memory_padding"] = memory_padding
            r = torch.randn(y.shape, generator=g)
            loss = (y * r).sum()
            wrt = {k: v for k, v in P.items() if v.requires_grad}
            grads = torch.autograd.grad(loss, list(wrt.values()) + list(inputs.values()))
            for k, gr in zip(list(wrt) + [f"input.{k}" for k in inputs], grads):
                out[f"grad.{k}"] = gr
            for k, v in inputs.items():
                out[f"input.{k}"] = v.detach()
            out["input.r"] = r
            out["expect.out"] = y.detach()
            out["expect.loss"] = loss.detach().reshape(1)
        else:
            mc = json.loads(meta["config"])
            cfg.update({k: mc[k] for k in ("pad_id", "share_embeddings", "tie_output")})
            pad, bos, eos = mc["pad_id"], 1, 2
            pe = positional_table(mc["max_len"], C)
            # the committed buffer is tapegrad's own table: the two agree exactly
            assert torch.equal(pe, weights["positional.pe"].double()), "positional tables differ"
            B, S, T = 3, 7, 6
            src = padded_ids([7, 4, 2], S, mc["src_vocab"], pad, g, 3)
            tgt_out = padded_ids([6, 3, 1], T, mc["tgt_vocab"], pad, g, 3)
            for b, n in enumerate([6, 3, 1]):
                tgt_out[b, n - 1] = eos
            tgt_in = torch.cat([torch.full((B, 1), bos), tgt_out[:, :-1]], 1)
            tgt_in[tgt_in == eos] = pad
            logits = mini_logits(P, src, tgt_in, cfg, pe)
            plain = cross_entropy(logits, tgt_out, pad, 0.0)
            smoothed = cross_entropy(logits, tgt_out, pad, 0.1)
            wrt = {k: v for k, v in P.items() if v.requires_grad}
            grads = torch.autograd.grad(smoothed, list(wrt.values()))
            for k, gr in zip(wrt, grads):
                out[f"grad.{k}"] = gr
            loss_fn = lambda Q: cross_entropy(mini_logits(Q, src, tgt_in, cfg, pe), tgt_out, pad, 0.1)
            decode_src = padded_ids([5, 3, 7], S, mc["src_vocab"], pad, g, 3)
            decodes = greedy(P, decode_src, cfg, pe, 6, bos, eos)
            out.update({"input.src": src, "input.tgt_in": tgt_in, "input.tgt_out": tgt_out,
                        "input.decode_src": decode_src,
                        "expect.logits": logits.detach(),
                        "expect.loss": plain.detach().reshape(1),
                        "expect.loss_smoothed": smoothed.detach().reshape(1),
                        "expect.adam_losses": torch.tensor(adam_trajectory(P, loss_fn, 10, 1e-2)),
                        # greedy tokens, each row padded with -1 to 6
                        "expect.greedy": torch.tensor([d + [-1] * (6 - len(d)) for d in decodes])})
        write_safetensors(f"{out_dir}/{name}.safetensors", out,
                          {"made_by": "tests/golden/make_golden.py", "torch": torch.__version__})
        print(f"{name}: {len(out)} tensors")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
