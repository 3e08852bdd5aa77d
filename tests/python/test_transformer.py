"""tapegrad.nn's attention and encoder modules, scaled dot-product attention, the optimizers'
groups and state, and the learning-rate schedulers, against PyTorch (python3-torch) with the
same weights: outputs and gradients in float64 to 1e-10."""
import copy
import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn import functional as F

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="python3-torch is not installed")


def close(ours, theirs, tol=1e-10):
    np.testing.assert_allclose(np.asarray(ours.detach()), theirs.detach().numpy(), rtol=tol,
                               atol=tol)


def twins(ours, theirs):
    """Our module given their module's weights, both in float64 and in eval mode."""
    theirs.double().eval()
    ours.double().load_state_dict(theirs.state_dict())
    return ours.eval(), theirs


def compare(ours, theirs, inputs, call):
    """call(module, lib, inputs) on both with the same float64 inputs: its first output, and
    the gradients of sum(out * R) for the inputs and every parameter, by name."""
    a = [tg.tensor(x, requires_grad=x.dtype == np.float64) for x in inputs]
    b = [torch.tensor(x, requires_grad=x.dtype == np.float64) for x in inputs]
    out_a, out_b = call(ours, tg, a), call(theirs, torch, b)
    close(out_a, out_b)
    r = np.random.default_rng(9).normal(size=tuple(out_b.shape))
    (out_a * tg.tensor(r)).sum().backward()
    (out_b * torch.tensor(r)).sum().backward()
    for x, y in zip(a, b):
        if y.requires_grad:
            close(x.grad, y.grad)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        close(p.grad, theirs_params[name].grad)


RNG = np.random.default_rng(4)
X = RNG.normal(size=(5, 2, 8))          # [L, B, E]
MEMORY = RNG.normal(size=(3, 2, 8))     # [S, B, E]
PADDING = np.array([[False, False, True], [False, False, False]])
CAUSAL = np.triu(np.ones((5, 5), dtype=bool), 1)


@needs_torch
@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_attention_matches_pytorch(need_weights):
    torch.manual_seed(0)
    ours, theirs = twins(nn.MultiheadAttention(8, 2), torch.nn.MultiheadAttention(8, 2))
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    # self-attention with a causal mask
    compare(ours, theirs, [X, CAUSAL],
            lambda m, lib, t: m(t[0], t[0], t[0], attn_mask=t[1], need_weights=need_weights)[0])
    ours.zero_grad(), theirs.zero_grad()
    # cross-attention over a padded memory
    compare(ours, theirs, [X, MEMORY, PADDING],
            lambda m, lib, t: m(t[0], t[1], t[1], key_padding_mask=t[2],
                                need_weights=need_weights)[0])
    if need_weights:
        w_ours = ours(tg.tensor(X), tg.tensor(MEMORY), tg.tensor(MEMORY),
                      key_padding_mask=tg.tensor(PADDING))[1]
        w_theirs = theirs(torch.tensor(X), torch.tensor(MEMORY), torch.tensor(MEMORY),
                          key_padding_mask=torch.tensor(PADDING))[1]
        close(w_ours, w_theirs)


@needs_torch
def test_multihead_attention_batch_first_and_a_float_mask():
    torch.manual_seed(1)
    ours, theirs = twins(nn.MultiheadAttention(8, 4, batch_first=True),
                         torch.nn.MultiheadAttention(8, 4, batch_first=True))
    bias = RNG.normal(size=(5, 5))
    x = X.transpose(1, 0, 2).copy()
    compare(ours, theirs, [x, bias],
            lambda m, lib, t: m(t[0], t[0], t[0], attn_mask=t[1], need_weights=False)[0])


@needs_torch
@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
def test_transformer_encoder_matches_pytorch(norm_first, activation):
    torch.manual_seed(2)
    tg.manual_seed(2)
    layer = dict(d_model=8, nhead=2, dim_feedforward=16, norm_first=norm_first,
                 activation=activation)
    ours, theirs = twins(nn.TransformerEncoder(nn.TransformerEncoderLayer(**layer), 2),
                         torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(**layer), 2,
                                                     enable_nested_tensor=False))
    padding = np.array([[False] * 5, [False, False, False, True, True]])
    compare(ours, theirs, [X, CAUSAL, padding],
            lambda m, lib, t: m(t[0], mask=t[1], src_key_padding_mask=t[2]))


def test_encoder_layers_are_independent_copies():
    tg.manual_seed(3)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 3)
    names = [n for n, _ in encoder.named_parameters()]
    assert names[:4] == ["layers.0.self_attn.in_proj_weight", "layers.0.self_attn.in_proj_bias",
                         "layers.0.self_attn.out_proj.weight", "layers.0.self_attn.out_proj.bias"]
    assert len(names) == 3 * 12
    a = encoder.layers[0].linear1.weight
    b = encoder.layers[1].linear1.weight
    assert a is not b and (np.asarray(a.detach()) == np.asarray(b.detach())).all()
    with tg.no_grad():
        a[0, 0] = 100.0
    assert np.asarray(b.detach())[0, 0] != 100.0
    assert isinstance(copy.deepcopy(a), nn.Parameter) and copy.deepcopy(a).requires_grad


@needs_torch
@pytest.mark.parametrize("mask", ["none", "bool", "float", "causal"])
def test_scaled_dot_product_attention_is_the_formula(mask):
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=(2, 3, n, 4)) for n in (5, 6, 6))
    bool_mask = rng.normal(size=(5, 6)) > -0.5
    add = rng.normal(size=(5, 6))

    def reference(q, k, v):  # torch 1.13 has no F.scaled_dot_product_attention
        s = q @ k.transpose(-2, -1) / math.sqrt(4)
        if mask == "bool":
            s = s.masked_fill(~torch.tensor(bool_mask), -math.inf)
        elif mask == "float":
            s = s + torch.tensor(add)
        elif mask == "causal":
            s = s.masked_fill(torch.ones(5, 6, dtype=torch.bool).triu(1), -math.inf)
        return s.softmax(-1) @ v

    kwargs = {"none": {}, "bool": {"attn_mask": tg.tensor(bool_mask)},
              "float": {"attn_mask": tg.tensor(add)}, "causal": {"is_causal": True}}[mask]
    a = [tg.tensor(x, requires_grad=True) for x in (q, k, v)]
    b = [torch.tensor(x, requires_grad=True) for x in (q, k, v)]
    out_a, out_b = F.scaled_dot_product_attention(*a, **kwargs), reference(*b)
    close(out_a, out_b)
    out_a.sum().backward()
    out_b.sum().backward()
    for x, y in zip(a, b):
        close(x.grad, y.grad)


def steps_of(optimizer_cls, grads, w0, **kwargs):
    p = nn.Parameter(tg.tensor(w0))
    opt = optimizer_cls([p], **kwargs)
    for g in grads:
        (p * tg.tensor(g)).sum().backward()
        opt.step()
        opt.zero_grad()
    return p, opt


def test_an_optimizers_state_dict_resumes_it_exactly():
    rng = np.random.default_rng(6)
    w0, grads = rng.normal(size=(3, 4)), [rng.normal(size=(3, 4)) for _ in range(6)]
    whole, _ = steps_of(tg.optim.AdamW, grads, w0, lr=0.01)
    half, opt = steps_of(tg.optim.AdamW, grads[:3], w0, lr=0.01)
    saved = opt.state_dict()
    assert sorted(saved["state"][0]) == ["exp_avg.0", "exp_avg_sq.0", "step"]
    resumed, again = steps_of(tg.optim.AdamW, [], np.asarray(half.detach()), lr=0.01)
    again.load_state_dict(saved)
    for g in grads[3:]:
        (resumed * tg.tensor(g)).sum().backward()
        again.step()
        again.zero_grad()
    assert (np.asarray(resumed.detach()) == np.asarray(whole.detach())).all()


@needs_torch
def test_parameter_groups_take_their_own_settings():
    rng = np.random.default_rng(7)
    w0, grads = rng.normal(size=(2, 3)), [rng.normal(size=(2, 3)) for _ in range(4)]
    a, b = nn.Parameter(tg.tensor(w0)), nn.Parameter(tg.tensor(w0))
    ta, tb = torch.nn.Parameter(torch.tensor(w0)), torch.nn.Parameter(torch.tensor(w0))
    ours = tg.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.01}], lr=0.1, momentum=0.9)
    theirs = torch.optim.SGD([{"params": [ta]}, {"params": [tb], "lr": 0.01}], lr=0.1,
                             momentum=0.9)
    for g in grads:
        ((a + b) * tg.tensor(g)).sum().backward()
        ta.grad, tb.grad = torch.tensor(g), torch.tensor(g)
        ours.step(), theirs.step()
        ours.zero_grad()
    close(a, ta, 1e-12)
    close(b, tb, 1e-12)
    with pytest.raises(ValueError, match="empty parameter list"):
        tg.optim.Adam([])


@needs_torch
def test_schedulers_give_pytorchs_learning_rates():
    def lrs(lib, make, n=12):
        p = (nn.Parameter(tg.zeros(1)) if lib is tg else torch.nn.Parameter(torch.zeros(1)))
        opt = (tg.optim.SGD if lib is tg else torch.optim.SGD)([p], lr=0.5)
        sched = make(lib.optim.lr_scheduler, opt)
        out = []
        for _ in range(n):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        return out

    for make in [lambda s, o: s.LambdaLR(o, lambda e: 1 / (e + 1)),
                 lambda s, o: s.StepLR(o, step_size=3, gamma=0.5),
                 lambda s, o: s.CosineAnnealingLR(o, T_max=10, eta_min=0.01)]:
        np.testing.assert_allclose(lrs(tg, make), lrs(torch, make), rtol=1e-12)


def test_tapegrads_own_schedules_are_the_cpp_ones():
    p = nn.Parameter(tg.zeros(1))
    opt = tg.optim.Adam([p], lr=1.0)
    noam = tg.optim.lr_scheduler.NoamLR(opt, d_model=64, warmup=4)
    got = []
    for _ in range(8):
        got.append(noam.get_last_lr()[0])
        noam.step()
    expected = [64 ** -0.5 * min(t ** -0.5, t * 4 ** -1.5) for t in range(1, 9)]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    opt = tg.optim.Adam([p], lr=0.1)
    cosine = tg.optim.lr_scheduler.WarmupCosineLR(opt, warmup=2, total=6, min_lr=0.01)
    got = []
    for _ in range(8):
        got.append(cosine.get_last_lr()[0])
        cosine.step()
    cos = [0.01 + 0.09 * (1 + math.cos(math.pi * (t - 2) / 4)) / 2 for t in range(3, 7)]
    np.testing.assert_allclose(got, [0.05, 0.1] + cos + [0.01, 0.01], rtol=1e-12)
