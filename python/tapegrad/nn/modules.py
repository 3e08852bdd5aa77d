"""tapegrad.nn's modules in plain Python over the engine's ops, as torch.nn has them: Module
and its containers, and the layers (Linear, Embedding, LayerNorm, Dropout, the activations)."""
import math
from collections import OrderedDict

import numpy as _np

import tapegrad as _tg
from tapegrad import _C
from tapegrad.nn import functional


class Parameter(_C.Tensor):
    """A tensor that is a module's parameter: a leaf that requires grad, sharing `data`'s
    storage (PyTorch's nn.Parameter)."""

    def __init__(self, data, requires_grad=True):
        super().__init__(data.detach())
        self.requires_grad = requires_grad

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    @classmethod
    def _of(cls, t):
        """t itself (its gradient, its version, its place on the tape) as a Parameter: a C++
        model's parameter seen from Python."""
        p = cls.__new__(cls)
        _C.Tensor.__init__(p, t)
        return p

    def __deepcopy__(self, memo):
        copied = Parameter(self.detach().clone(), self.requires_grad)
        memo[id(self)] = copied
        return copied


class Module:
    """The base of every layer: parameters, buffers and submodules by attribute name."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign before Module.__init__() call")
        for table in (self._parameters, self._buffers, self._modules):
            table.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)
            return
        self.__dict__.pop(name, None)

    def __getattr__(self, name):
        for table in ("_parameters", "_buffers", "_modules"):
            entries = self.__dict__.get(table)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def register_buffer(self, name, tensor):
        self._buffers[name] = tensor

    def register_parameter(self, name, param):
        self._parameters[name] = param

    def add_module(self, name, module):
        self._modules[name] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        return (m for _, m in self.named_modules())

    def named_children(self):
        return iter(self._modules.items())

    def children(self):
        return iter(self._modules.values())

    def named_parameters(self, prefix=""):
        for path, module in self.named_modules(prefix):
            for name, p in module._parameters.items():
                yield (f"{path}.{name}" if path else name), p

    def parameters(self):
        return (p for _, p in self.named_parameters())

    def named_buffers(self, prefix=""):
        for path, module in self.named_modules(prefix):
            for name, b in module._buffers.items():
                yield (f"{path}.{name}" if path else name), b

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def to(self, dtype):
        """Every floating parameter and buffer converted to dtype (float64 for a gradcheck).
        Each converted parameter is a new Parameter: make the optimizer after. to("cpu") is
        the module itself (tapegrad has no other device)."""
        if not isinstance(dtype, _C.dtype):
            _tg._cpu(dtype)
            return self
        for m in self.modules():
            for table in (m._parameters, m._buffers):
                for name, t in table.items():
                    if t.dtype.is_floating_point and t.dtype != dtype:
                        converted = t.detach().to(dtype)
                        table[name] = Parameter(converted, t.requires_grad) \
                            if isinstance(t, Parameter) else converted
        return self

    def double(self):
        return self.to(_tg.float64)

    def float(self):
        return self.to(_tg.float32)

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None

    def state_dict(self):
        """The parameters and buffers by dotted name, detached (sharing their storage, as
        PyTorch's): tapegrad.safetensors.save_file writes it."""
        return OrderedDict((name, t.detach()) for name, t in
                           list(self.named_parameters()) + list(self.named_buffers()))

    def load_state_dict(self, state, strict=True):
        """Copies tensors (tapegrad's, PyTorch's where the layouts agree, or numpy arrays) into
        the parameters and buffers, in place. Missing and unexpected
        names, and shapes that differ, are one error naming them all."""
        own = OrderedDict(list(self.named_parameters()) + list(self.named_buffers()))
        problems = []
        if strict:
            problems += [f"missing: {n}" for n in own if n not in state]
            problems += [f"unexpected: {n}" for n in state if n not in own]
        arrays = {}
        for name, value in state.items():
            if name not in own:
                continue
            array = _np.asarray(value.detach().numpy() if hasattr(value, "detach") else value)
            if tuple(array.shape) != own[name].shape:
                problems.append(f"{name}: shape {tuple(array.shape)}, the module's {own[name].shape}")
            arrays[name] = array
        if problems:
            raise _tg.Error("load_state_dict: " + "; ".join(problems))
        for name, array in arrays.items():
            own[name].detach().numpy()[...] = array
            own[name]._bump_version()

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, child in self._modules.items():
            lines.append(f"  ({name}): " + repr(child).replace("\n", "\n  "))
        return lines[0] + (")" if len(lines) == 1 else "\n" + "\n".join(lines[1:]) + "\n)")

    def extra_repr(self):
        return ""


class CrossEntropyLoss(Module):
    """functional.cross_entropy as a module, as torch.nn.CrossEntropyLoss."""

    def __init__(self, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
        super().__init__()
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing
        self.reduction = reduction

    def forward(self, input, target):
        return functional.cross_entropy(input, target, self.ignore_index, self.label_smoothing,
                                        self.reduction)


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        self._modules[str(len(self._modules))] = module
        return self

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class Sequential(ModuleList):
    def __init__(self, *modules):
        super().__init__(modules)

    def forward(self, x):
        for m in self:
            x = m(x)
        return x


def _uniform(shape, bound):
    return _tg.rand(*shape, dtype=_tg.float32) * (2 * bound) - bound


class Linear(Module):
    """y = x @ weight^T + bias, weight [out_features, in_features]; initialised as PyTorch's
    (uniform in +-1/sqrt(in_features)) from tapegrad's default generator."""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1 / math.sqrt(in_features)
        self.weight = Parameter(_uniform((out_features, in_features), bound))
        self.bias = Parameter(_uniform((out_features,), bound)) if bias else None

    def forward(self, x):
        return functional.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, " \
               f"bias={self.bias is not None}"


class ReLU(Module):
    def forward(self, x):
        return x.relu()


class GELU(Module):
    def forward(self, x):
        return functional.gelu(x)


class Dropout(Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, x):
        return functional.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None):
        super().__init__()
        self.padding_idx = padding_idx
        weight = _tg.randn(num_embeddings, embedding_dim)
        if padding_idx is not None:
            weight.numpy()[padding_idx] = 0
        self.weight = Parameter(weight)

    def forward(self, ids):
        return functional.embedding(ids, self.weight, self.padding_idx)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        n = normalized_shape if isinstance(normalized_shape, int) else normalized_shape[-1]
        self.eps = eps
        self.weight = Parameter(_tg.ones(n))
        self.bias = Parameter(_tg.zeros(n))

    def forward(self, x):
        return functional.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)
