"""tapegrad.nn and tapegrad.optim from Python: a module's registry and its names, a learner's
own Module trained by the optimizers, state dicts (a PyTorch one loads), and nn.functional and
the update rules against PyTorch where python3-torch is installed."""
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


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 8)
        self.layers = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 2, bias=False)])
        self.norm = nn.LayerNorm(8)
        self.scale = nn.Parameter(tg.ones(2))

    def forward(self, x):
        h = self.norm(self.proj(x).relu())
        return self.layers[1](self.layers[0](h).relu()) * self.scale


def test_parameters_are_registered_by_attribute_with_dotted_names():
    names = [n for n, _ in Block().named_parameters()]
    assert names == ["scale", "proj.weight", "proj.bias", "layers.0.weight", "layers.0.bias",
                     "layers.1.weight", "norm.weight", "norm.bias"]
    b = Block()
    assert [type(c).__name__ for c in b.children()] == ["Linear", "ModuleList", "LayerNorm"]
    assert all(p.requires_grad and p.is_leaf for p in b.parameters())
    assert not b.eval().layers[0].training and b.train().layers[0].training


def test_a_learners_module_trains_with_each_optimizer():
    rng = np.random.default_rng(0)
    x = tg.tensor(rng.normal(size=(64, 4)).astype(np.float32))
    y = tg.tensor(rng.integers(0, 2, size=64))
    for make in [lambda p: tg.optim.SGD(p, lr=0.1, momentum=0.9), lambda p: tg.optim.Adam(p, lr=1e-2),
                 lambda p: tg.optim.AdamW(p, lr=1e-2)]:
        tg.manual_seed(1)
        model = Block()
        opt = make(model.parameters())
        first = None
        for _ in range(60):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            tg.optim.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            first = first if first is not None else loss.item()
        assert loss.item() < 0.5 * first, type(opt).__name__


def test_an_optimizer_step_after_the_forward_is_caught_by_backward():
    model = nn.Linear(3, 1)
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    loss = model(tg.ones(2, 3)).sum()
    loss.backward(retain_graph=True)
    opt.step()
    with pytest.raises(tg.Error, match="modified in place"):
        loss.backward()


def test_state_dict_round_trips_and_refuses_what_does_not_fit():
    a, b = Block(), Block()
    b.load_state_dict(a.state_dict())
    x = tg.ones(3, 4)
    assert (np.asarray(a(x)) == np.asarray(b(x))).all()
    state = a.state_dict()
    state["proj.weight"] = np.zeros((2, 2))
    del state["scale"]
    with pytest.raises(tg.Error, match=r"missing: scale.*proj.weight: shape \(2, 2\)"):
        b.load_state_dict(state)


@needs_torch
def test_a_pytorch_state_dict_loads_where_the_layouts_agree():
    t = torch.nn.Linear(4, 3)
    ours = nn.Linear(4, 3)
    ours.load_state_dict(t.state_dict())
    x = np.random.default_rng(2).normal(size=(5, 4)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(ours(tg.tensor(x))),
                               t(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def run_both(fn, arrays, ints=()):
    """fn(lib, F, inputs) on both libraries in float64: outputs and gradients to 1e-10."""
    ours = [tg.tensor(a, requires_grad=True) for a in arrays] + [tg.tensor(i) for i in ints]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays] + [torch.tensor(i) for i in ints]
    out_ours = fn(tg, F, ours)
    out_theirs = fn(torch, torch.nn.functional, theirs)
    r = np.random.default_rng(5).normal(size=tuple(out_theirs.shape))
    (out_ours * tg.tensor(r)).sum().backward()
    (out_theirs * torch.tensor(r)).sum().backward()
    np.testing.assert_allclose(np.asarray(out_ours), out_theirs.detach().numpy(), rtol=1e-10,
                               atol=1e-10)
    for a, b in zip(ours[:len(arrays)], theirs):
        np.testing.assert_allclose(np.asarray(a.grad), b.grad.numpy(), rtol=1e-10, atol=1e-10)


@needs_torch
def test_functional_matches_pytorch():
    rng = np.random.default_rng(4)
    x, w, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(5, 4)), rng.normal(size=5)
    run_both(lambda m, f, t: f.linear(t[0], t[1], t[2]), [x, w, b])
    run_both(lambda m, f, t: f.linear(t[0], t[1]), [x, w])
    run_both(lambda m, f, t: f.gelu(t[0]), [x])
    run_both(lambda m, f, t: f.layer_norm(t[0], (4,), t[1], t[2]), [x, rng.normal(size=4),
                                                                    rng.normal(size=4)])
    targets = np.array([1, 0, -100, 4, 2])
    run_both(lambda m, f, t: f.cross_entropy(t[0], t[1], ignore_index=-100, label_smoothing=0.1),
             [rng.normal(size=(5, 6))], [targets])
    run_both(lambda m, f, t: f.embedding(t[1], t[0]), [rng.normal(size=(7, 3))],
             [np.array([[0, 6, 2], [2, 2, 1]])])
    run_both(lambda m, f, t: f.log_softmax(t[0], dim=-1) + f.softmax(t[0], dim=0), [x])


@needs_torch
def test_adam_and_sgd_follow_pytorchs_update_rules():
    rng = np.random.default_rng(6)
    w0 = rng.normal(size=(3, 4))
    grads = [rng.normal(size=(3, 4)) for _ in range(5)]
    for ours_cls, theirs_cls, kwargs in [
            (tg.optim.Adam, torch.optim.Adam, dict(lr=0.01, weight_decay=0.1)),
            (tg.optim.AdamW, torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1)),
            (tg.optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.01))]:
        p = nn.Parameter(tg.tensor(w0))
        q = torch.nn.Parameter(torch.tensor(w0))
        ours, theirs = ours_cls([p], **kwargs), theirs_cls([q], **kwargs)
        for g in grads:
            (p * tg.tensor(g)).sum().backward()
            q.grad = torch.tensor(g)
            ours.step()
            theirs.step()
            ours.zero_grad()
        np.testing.assert_allclose(np.asarray(p), q.detach().numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=ours_cls.__name__)
