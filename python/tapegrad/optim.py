"""tapegrad.optim: SGD, Adam and AdamW with torch.optim's names, param_groups and state_dict,
over the C++ optimizers (tapegrad/optim), whose update rules are PyTorch's; the learning-rate
schedulers of torch.optim.lr_scheduler and tapegrad's own (NoamLR, WarmupCosineLR); and
clip_grad_norm_.

Each parameter group is one C++ optimizer: its step updates the group's parameters in place,
unrecorded and threaded, and bumps their version counters, so a graph that saved a parameter
before the step refuses to run backward. A group's "lr" may be changed between steps (the
schedulers do); its other settings are fixed when the optimizer is made."""
import math

import numpy as _np

from tapegrad import _C


class Optimizer:
    def __init__(self, params, defaults):
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.defaults = defaults
        self.param_groups = [{**defaults, **g, "params": list(g["params"])} for g in groups]
        self._groups = [self._make(g) for g in self.param_groups]

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, engine in zip(self.param_groups, self._groups):
            engine.lr = group["lr"]
            engine.step()
        return loss

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    def state_dict(self):
        """Each group's buffers ("exp_avg.0" for the first parameter's) and step count, as
        numpy arrays, and the groups' settings."""
        return {"state": [{k: _np.array(v) for k, v in e.state()} for e in self._groups],
                "param_groups": [{k: v for k, v in g.items() if k != "params"}
                                 for g in self.param_groups]}

    def load_state_dict(self, state):
        if len(state["state"]) != len(self._groups):
            raise ValueError(f"load_state_dict: {len(state['state'])} groups for "
                             f"{len(self._groups)}")
        import tapegrad as tg
        for engine, saved, group, settings in zip(self._groups, state["state"],
                                                  self.param_groups, state["param_groups"]):
            engine.load_state([(k, tg.tensor(v)) for k, v in saved.items()])
            group["lr"] = settings["lr"]


class SGD(Optimizer):
    """As torch.optim.SGD: weight decay added to the gradient, momentum with dampening,
    Nesterov."""

    def __init__(self, params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    @staticmethod
    def _make(g):
        return _C._SGD(g["params"], g["lr"], g["momentum"], g["dampening"], g["weight_decay"],
                       g["nesterov"])


class Adam(Optimizer):
    """As torch.optim.Adam: bias-corrected moments, eps outside the square root, weight_decay
    added to the gradient (L2)."""
    _engine = _C._Adam

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))

    @classmethod
    def _make(cls, g):
        b1, b2 = g["betas"]
        return cls._engine(g["params"], g["lr"], b1, b2, g["eps"], g["weight_decay"])


class AdamW(Adam):
    """As torch.optim.AdamW: decoupled weight decay (p *= 1 - lr * weight_decay before the
    update), by default 0.01 as PyTorch's."""
    _engine = _C._AdamW

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr, betas, eps, weight_decay)


def clip_grad_norm_(parameters, max_norm):
    """Scales every gradient by max_norm / total norm when the total L2 norm is larger; returns
    the total norm, as torch.nn.utils.clip_grad_norm_."""
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    return _C._clip_grad_norm(list(parameters), max_norm)


class lr_scheduler:  # noqa: N801, a namespace as torch.optim.lr_scheduler
    class LRScheduler:
        """Sets each group's lr from its initial lr and the count of step() calls, as
        torch.optim.lr_scheduler's: made after the optimizer, stepped after optimizer.step()."""

        def __init__(self, optimizer, last_epoch=-1):
            self.optimizer = optimizer
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
            self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
            self.last_epoch = last_epoch
            self.step()

        def step(self):
            self.last_epoch += 1
            for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
                group["lr"] = lr

        def get_last_lr(self):
            return [group["lr"] for group in self.optimizer.param_groups]

        def state_dict(self):
            return {"last_epoch": self.last_epoch, "base_lrs": list(self.base_lrs)}

        def load_state_dict(self, state):
            self.last_epoch, self.base_lrs = state["last_epoch"], list(state["base_lrs"])

    class LambdaLR(LRScheduler):
        def __init__(self, optimizer, lr_lambda, last_epoch=-1):
            n = len(optimizer.param_groups)
            self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) \
                else [lr_lambda] * n
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            return [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]

    class StepLR(LRScheduler):
        def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
            self.step_size, self.gamma = step_size, gamma
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            return [base * self.gamma ** (self.last_epoch // self.step_size)
                    for base in self.base_lrs]

    class CosineAnnealingLR(LRScheduler):
        """The closed form of torch's: eta_min + (base - eta_min) (1 + cos(pi t / T_max)) / 2."""

        def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):  # noqa: N803
            self.T_max, self.eta_min = T_max, eta_min
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            c = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
            return [self.eta_min + (base - self.eta_min) * c for base in self.base_lrs]

    class NoamLR(LRScheduler):
        """tapegrad's: the paper's schedule (section 5.3), factor * d_model^-0.5 *
        min(t^-0.5, t * warmup^-1.5) at step t = last_epoch + 1, whatever the group's lr (the
        C++ NoamSchedule, as train --schedule noam)."""

        def __init__(self, optimizer, d_model, warmup, factor=1.0, last_epoch=-1):
            self.schedule = _C._NoamSchedule(d_model, warmup, factor)
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            return [self.schedule.lr(self.last_epoch + 1)] * len(self.base_lrs)

    class WarmupCosineLR(LRScheduler):
        """tapegrad's: a linear warmup to the group's lr over `warmup` steps, then a cosine decay
        to min_lr at `total` steps (the C++ WarmupCosineSchedule, at step last_epoch + 1)."""

        def __init__(self, optimizer, warmup, total, min_lr=0.0, last_epoch=-1):
            self.warmup, self.total, self.min_lr = warmup, total, min_lr
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            return [_C._WarmupCosineSchedule(base, self.warmup, self.total, self.min_lr)
                    .lr(self.last_epoch + 1) for base in self.base_lrs]
