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
