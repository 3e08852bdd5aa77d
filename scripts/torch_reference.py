#!/usr/bin/python3
"""Prints the PyTorch reference numbers that tests/ compare against (Debian's python3-torch).

The test suite never runs this: its output is copied into the tests, each number next to the
call that produced it; the higher-order references (gradients of gradients, hooks) are written
to tests/autograd/torch_reference.h instead. Run it from the repository's root to re-derive
them:  /usr/bin/python3 scripts/torch_reference.py
"""
import math
import subprocess

import torch
import torch.nn.functional as F

torch.set_printoptions(precision=10)

# tests/autograd/test_loss.cpp: label smoothing together with ignore_index
logits = torch.tensor([[1., 2., 3.], [0., 0., 5.]], dtype=torch.float64, requires_grad=True)
loss = F.cross_entropy(logits, torch.tensor([2, 0]), label_smoothing=0.2, ignore_index=2)
loss.backward()
print("cross_entropy smoothing 0.2 ignore 2:", loss.item(), logits.grad.flatten().tolist())

# tests/autograd/test_layernorm.cpp: affine layer norm of a non-trivial row
x = torch.tensor([[0.5, -1.0, 2.0, 4.0]], dtype=torch.float64)
w = torch.tensor([1.0, 0.5, -1.0, 2.0], dtype=torch.float64)
b = torch.tensor([0.0, 0.1, 0.2, 0.3], dtype=torch.float64)
print("layer_norm:", F.layer_norm(x, (4,), w, b, 1e-5).flatten().tolist())

# tests/autograd/test_elementwise.cpp: exact GELU
print("gelu:", F.gelu(torch.tensor([1.0, -1.0, 2.5], dtype=torch.float64)).tolist())

# tests/optim/test_optimizer.cpp: five steps of each optimizer on
#   loss = sum((x @ w + b - y)^2)
def trajectory(make, steps=5):
    w = torch.tensor([[0.5, -1.0], [1.5, 2.0]], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
    x = torch.tensor([[1.0, 2.0], [-1.0, 0.5], [0.0, 3.0]], dtype=torch.float64)
    y = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]], dtype=torch.float64)
    opt = make([w, b])
    for _ in range(steps):
        opt.zero_grad()
        ((x @ w + b - y) ** 2).sum().backward()
        opt.step()
    return w.detach().flatten().tolist() + b.detach().tolist()

for label, make in [
    ("SGD lr=0.01", lambda p: torch.optim.SGD(p, lr=0.01)),
    ("SGD lr=0.01 momentum=0.9 dampening=0.1 weight_decay=0.1",
     lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, dampening=0.1, weight_decay=0.1)),
    ("SGD lr=0.01 momentum=0.9 nesterov",
     lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, nesterov=True)),
    ("Adam lr=0.1", lambda p: torch.optim.Adam(p, lr=0.1)),
    ("Adam lr=0.1 betas=(0.8,0.99) weight_decay=0.1",
     lambda p: torch.optim.Adam(p, lr=0.1, betas=(0.8, 0.99), weight_decay=0.1)),
    ("AdamW lr=0.1 weight_decay=0.1", lambda p: torch.optim.AdamW(p, lr=0.1, weight_decay=0.1)),
]:
    print(label + ":", trajectory(make))

# clip_grad_norm_ on the gradients of the first step
w = torch.tensor([[0.5, -1.0], [1.5, 2.0]], dtype=torch.float64, requires_grad=True)
x = torch.tensor([[1.0, 2.0], [-1.0, 0.5], [0.0, 3.0]], dtype=torch.float64)
((x @ w) ** 2).sum().backward()
norm = torch.nn.utils.clip_grad_norm_([w], 1.0)
print("clip_grad_norm:", norm.item(), w.grad.flatten().tolist())


# tests/autograd/test_higher_order.cpp: a Hessian-vector product, a gradient-penalty step and
# hooks. The inputs are closed-form patterns (sin and cos of the element index) so the C++ test
# builds the same tensors.
def pattern(shape, f, scale, shift=0.0):
    n = math.prod(shape)
    return torch.tensor([scale * f(i + shift) for i in range(n)]).reshape(shape)


def mlp_hvp():
    # loss = mean((tanh(x w1^T) w2^T - y)^2); H v for the direction (v1, v2)
    x = pattern((4, 3), math.sin, 1.0)
    y = pattern((4, 1), math.cos, 1.0)
    w1 = pattern((5, 3), math.cos, 0.5).requires_grad_()
    w2 = pattern((1, 5), math.sin, 0.5, 1.0).requires_grad_()
    v1 = pattern((5, 3), math.sin, 1.0, 2.0)
    v2 = pattern((1, 5), math.cos, 1.0, 3.0)
    out = torch.tanh(x @ w1.T) @ w2.T
    loss = ((out - y) ** 2).mean()
    g1, g2 = torch.autograd.grad(loss, (w1, w2), create_graph=True)
    h1, h2 = torch.autograd.grad((g1 * v1).sum() + (g2 * v2).sum(), (w1, w2))
    return {"kMlpHvpW1": h1, "kMlpHvpW2": h2}


def gradient_penalty():
    # critic = sum(tanh(x w)); penalty = mean((|d critic / dx| - 1)^2); d penalty / dw
    x = pattern((4, 3), math.cos, 1.0, 1.0).requires_grad_()
    w = pattern((3, 2), math.sin, 0.8, 2.0).requires_grad_()
    critic = torch.tanh(x @ w).sum()
    (g,) = torch.autograd.grad(critic, x, create_graph=True)
    penalty = ((g.pow(2).sum(1).sqrt() - 1) ** 2).mean()
    penalty.backward()
    return {"kPenalty": penalty.detach().reshape(1), "kPenaltyGradW": w.grad}


def hooks():
    # h = x * x used twice; a hook on h scales its gradient by 10 (then h retains it); a hook
    # registered and removed before backward; a hook on the leaf x adds 1
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    h = x * x
    h.register_hook(lambda g: g * 10)
    h.retain_grad()
    removed = h.register_hook(lambda g: g * 1000)
    removed.remove()
    x.register_hook(lambda g: g + 1)
    out = (h * 3 + h * h).sum()
    out.backward()
    return {"kHookHGrad": h.grad, "kHookXGrad": x.grad}


def write_higher_order_header():
    values = {}
    for f in (mlp_hvp, gradient_penalty, hooks):
        values.update(f())
    lines = [
        "// Generated by scripts/torch_reference.py from PyTorch " + torch.__version__ + "; do not edit.",
        "// The higher-order tests (test_higher_order.cpp) compare the engine with these.",
        "#pragma once",
        "",
        "#include <vector>",
        "",
        "namespace torch_reference {",
    ]
    for name, t in values.items():
        flat = ", ".join(repr(float(v)) for v in t.detach().reshape(-1).tolist())
        lines.append(f"inline const std::vector<double> {name}{{{flat}}};")
    lines += ["}  // namespace torch_reference", ""]
    path = "tests/autograd/torch_reference.h"
    with open(path, "w") as f:
        f.write("\n".join(lines))
    subprocess.run(["clang-format", "-i", path], check=True)  # the project's style, line widths




torch.set_default_dtype(torch.float64)
write_higher_order_header()
