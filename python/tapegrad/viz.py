"""tapegrad's own pictures, drawn by tapegrad/viz (SVG, no plotting library needed), shown
inline by a notebook (each is an SVG object Jupyter displays) or saved with .save(path):

    tg.viz.loss_curve(losses)                        # a list of values, or (step, value) pairs
    tg.viz.heatmap(weights, source, target, "attention")   # weights [H, T, S] or [T, S]
    with tg.viz.tape_details():                      # shapes and saved buffers too
        loss = (x * w).sum()
    drawing = tg.viz.tape(loss=loss, w=w)            # the graph behind them, drawn
    loss.backward()                                  # the drawing notes each gradient's norm
    drawing                                          # shows the tape
"""
import base64
import contextlib

from tapegrad import _C


def _as_img(svg):
    """An <img> of the SVG as a data URL: what a notebook shows, and what `jupyter nbconvert`
    keeps in its HTML (its HTML export strips an inline SVG's drawing; an image it leaves)."""
    return '<img src="data:image/svg+xml;base64,%s"/>' % base64.b64encode(svg.encode()).decode()


class SVG:
    """An SVG picture: Jupyter shows it inline; .save(path) writes it; str() is its text."""

    def __init__(self, text):
        self.text = text

    def _repr_svg_(self):
        return self.text

    def _repr_html_(self):
        return _as_img(self.text)

    def __str__(self):
        return self.text

    def save(self, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.text)


def _pairs(series):
    return [(s, float(v)) for s, v in (series if series and isinstance(series[0], (tuple, list))
                                       else enumerate(series, 1))]


def loss_curve(train, valid=(), train_label="training loss", valid_label="validation loss",
               x_label="step", y_label="loss"):
    """train as a line and valid as dots against the step: lists of values (steps 1, 2, ...)
    or of (step, value) pairs."""
    return SVG(_C._loss_curve_svg(_pairs(list(train)), _pairs(list(valid)), train_label,
                                  valid_label, x_label, y_label))


def heatmap(weights, source, target, title="", legend="weight", panels=(), high=1.0,
            signed_scale=False):
    """weights [H, T, S] (one panel a head) or [T, S]: the source tokens along x, the target
    tokens along y, darker for more; signed_scale for values from -high to high."""
    if weights.dim() == 2:
        weights = weights.unsqueeze(0)
    return SVG(_C._heatmap_svg(weights.detach().float(), list(map(str, source)),
                               list(map(str, target)), title, legend, list(panels), high,
                               signed_scale))


@contextlib.contextmanager
def tape_details():
    """While it is open, each recorded op also keeps its inputs' shapes and what it saved, for
    tape()'s drawing."""
    previous = _C._set_tape_details(True)
    try:
        yield
    finally:
        _C._set_tape_details(previous)


class tape:  # noqa: N801, a function to its users
    """The graph behind the named tensors, drawn (each op in recording order, the shapes, the
    leaves, what each op saved); after a backward, each tensor's gradient norm too."""

    def __init__(self, **named):
        self._drawing = _C._TapeDrawing(list(named.items()))

    def svg(self):
        return SVG(self._drawing.svg())

    def dot(self):
        return self._drawing.dot()

    def _repr_svg_(self):
        return self._drawing.svg()

    def _repr_html_(self):
        return _as_img(self._drawing.svg())
