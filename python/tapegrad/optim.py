"""tapegrad.optim: SGD, Adam and AdamW with PyTorch's update rules, over a module's parameters,
and clip_grad_norm_. The updates run with recording off and write the parameters in place."""
import math

import numpy as _np


class Optimizer:
    def __init__(self, params, defaults):
        self.params = list(params)
        self.defaults = defaults
        self.state = {}

    def zero_grad(self, set_to_none=True):
        for p in self.params:
            p.grad = None

    def _grads(self):
        """Each parameter with a gradient, its data as a numpy view to update in place (its
        version counter bumped after, so a graph that saved it refuses to run backward)."""
        for p in self.params:
            g = p.grad
            if g is not None:
                yield p, p.detach().numpy(), _np.asarray(g)
                p._bump_version()


class SGD(Optimizer):
    """p -= lr * (g + weight_decay * p), with momentum as PyTorch's (a buffer b = momentum * b
    + g; nesterov uses g + momentum * b)."""

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0, nesterov=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay))
        self.lr, self.momentum, self.weight_decay, self.nesterov = lr, momentum, weight_decay, nesterov

    def step(self):
        for p, data, g in self._grads():
            d = g + self.weight_decay * data if self.weight_decay else g
            if self.momentum:
                b = self.state.get(id(p))
                b = d.copy() if b is None else self.momentum * b + d
                self.state[id(p)] = b
                d = d + self.momentum * b if self.nesterov else b
            data -= self.lr * d


class Adam(Optimizer):
    """Adam as PyTorch's (bias-corrected moments, eps outside the square root); weight_decay
    adds weight_decay * p to the gradient (L2), as torch.optim.Adam does."""
    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        self.steps = 0

    def step(self):
        self.steps += 1
        b1, b2 = self.betas
        for p, data, g in self._grads():
            if self.weight_decay and self.decoupled:
                data *= 1 - self.lr * self.weight_decay
            elif self.weight_decay:
                g = g + self.weight_decay * data
            m, v = self.state.setdefault(id(p), (_np.zeros_like(data), _np.zeros_like(data)))
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            m_hat = m / (1 - b1 ** self.steps)
            v_hat = v / (1 - b2 ** self.steps)
            data -= (self.lr * m_hat / (_np.sqrt(v_hat) + self.eps)).astype(data.dtype)


class AdamW(Adam):
    """Adam with decoupled weight decay (p *= 1 - lr * weight_decay before the update), as
    torch.optim.AdamW; its default weight_decay is PyTorch's, 0.01."""
    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr, betas, eps, weight_decay)


def clip_grad_norm_(parameters, max_norm):
    """Scales every gradient by max_norm / total norm when the total L2 norm is larger; returns
    the total norm, as torch.nn.utils.clip_grad_norm_."""
    grads = [_np.asarray(p.grad) for p in parameters if p.grad is not None]
    total = math.sqrt(sum(float((g.astype(_np.float64) ** 2).sum()) for g in grads))
    if total > max_norm:
        for g in grads:
            g *= max_norm / (total + 1e-6)
    return total
