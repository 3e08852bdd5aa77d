"""A tensor's repr as PyTorch prints it (torch/_tensor_str.py's rules, PyTorch's defaults:
precision 4, line width 80, a summary with 3 edge items past 1000 elements), so a notebook's
printed tensors read as the seed's do:

    tensor([[1., 2.],            tensor([0.5000, 1.2500])      tensor([1.0000e-05, 1.0000e+00])
            [3., 4.]], dtype=tapegrad.float64)

A tensor made by an op shows grad_fn=<op>, the op tapegrad recorded (PyTorch names a class,
<MulBackward0>)."""
import math

import numpy as np

PRECISION, LINEWIDTH, THRESHOLD, EDGEITEMS = 4, 80, 1000, 3


def _summarized(a):
    """The edge items of every dim of a large array, as PyTorch's summary shows them."""
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * EDGEITEMS:
        a = np.concatenate([a[:EDGEITEMS], a[-EDGEITEMS:]])
    return np.stack([_summarized(row) for row in a]) if a.ndim > 1 else a


class _Formatter:
    def __init__(self, values):
        self.floating = values.dtype.kind == "f"
        self.int_mode, self.sci_mode, self.width = True, False, 1
        flat = values.reshape(-1).tolist()
        if not self.floating:
            self.width = max([len(str(v)) for v in flat] + [1])
            return
        finite = [v for v in flat if math.isfinite(v) and v != 0]
        if not finite:
            return
        low, high = min(abs(v) for v in finite), max(abs(v) for v in finite)
        self.int_mode = all(v == math.ceil(v) for v in finite)
        if self.int_mode:
            self.sci_mode = high / low > 1000 or high > 1e8
            strings = [f"{v:.{PRECISION}e}" if self.sci_mode else f"{v:.0f}." for v in finite]
        else:
            self.sci_mode = high / low > 1000 or high > 1e8 or low < 1e-4
            strings = [f"{v:.{PRECISION}e}" if self.sci_mode else f"{v:.{PRECISION}f}"
                       for v in finite]
        self.width = max(len(s) for s in strings)

    def format(self, v):
        if not self.floating:
            text = str(v)
        elif self.sci_mode:
            text = f"{v:.{PRECISION}e}"
        elif self.int_mode:
            text = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        else:
            text = f"{v:.{PRECISION}f}"
        return text.rjust(self.width)


def _vector(a, indent, summarize, fmt):
    per_line = max(1, (LINEWIDTH - indent) // (fmt.width + 2))
    values = a.tolist()
    if summarize and len(values) > 2 * EDGEITEMS:
        data = [fmt.format(v) for v in values[:EDGEITEMS]] + [" ..."] + \
               [fmt.format(v) for v in values[-EDGEITEMS:]]
    else:
        data = [fmt.format(v) for v in values]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _body(a, indent, summarize, fmt):
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector(a, indent, summarize, fmt)
    if summarize and a.shape[0] > 2 * EDGEITEMS:
        rows = [_body(a[i], indent + 1, summarize, fmt) for i in range(EDGEITEMS)] + ["..."] + \
               [_body(a[i], indent + 1, summarize, fmt) for i in range(len(a) - EDGEITEMS, len(a))]
    else:
        rows = [_body(row, indent + 1, summarize, fmt) for row in a]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def tensor_repr(t):
    import tapegrad as tg
    prefix = "tensor("
    a = np.asarray(t.detach())
    suffixes = []
    if a.size == 0:
        body = "[]"
        if a.ndim != 1:
            suffixes.append(f"size={tuple(a.shape)}")
    else:
        summarize = a.size > THRESHOLD
        fmt = _Formatter(_summarized(a) if summarize else a)
        body = _body(a, len(prefix), summarize, fmt)
    if t.dtype not in (tg.float32, tg.int64, tg.bool):
        suffixes.append(f"dtype={t.dtype}")
    if t._grad_fn is not None:
        suffixes.append(f"grad_fn=<{t._grad_fn}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    text = prefix + body
    last = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last + len(suffix) + 2 > LINEWIDTH:
            text += ",\n" + " " * len(prefix) + suffix
            last = len(prefix) + len(suffix)
        else:
            text += ", " + suffix
            last += len(suffix) + 2
    return text + ")"
