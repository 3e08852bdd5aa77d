#!/usr/bin/python3
"""Prints the PyTorch reference numbers that tests/ compare against (Debian's python3-torch).

The test suite never runs this: its output is copied into the tests, each number next to the
call that produced it. Run it again to re-derive them:  /usr/bin/python3 scripts/torch_reference.py
"""
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
