"""tapegrad.viz from Python: the pictures a notebook shows inline (a loss curve, attention
heatmaps, the tape), and the PyTorch habits the seed notebooks have (devices, the loss module)."""
import base64
import re

import pytest

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn import functional as F


def test_a_loss_curve_draws_both_series_with_their_labels():
    svg = tg.viz.loss_curve([3.0, 2.0, 1.5, 1.2], valid=[(2, 2.5), (4, 1.4)],
                            train_label="train", valid_label="held out").text
    assert svg.startswith("<svg") and "train" in svg and "held out" in svg
    assert svg.count("<circle") == 2 + 1  # a dot a validation, and the legend's
    alone = tg.viz.loss_curve([3.0, 2.0]).text
    assert "<circle" not in alone and "validation loss" not in alone  # no legend for nothing
    assert tg.viz.loss_curve([1.0])._repr_svg_() == tg.viz.loss_curve([(1, 1.0)]).text
    # a notebook (and nbconvert's HTML) shows it as an image of the same SVG
    html = tg.viz.loss_curve([1.0])._repr_html_()
    assert base64.b64decode(html.split("base64,")[1].split('"')[0]).decode() == \
        tg.viz.loss_curve([1.0]).text


def test_a_heatmap_draws_a_panel_a_head_with_the_tokens():
    weights = tg.rand(3, 2, 4).softmax(-1)
    svg = tg.viz.heatmap(weights, "abcd", ["x", "y"], "attention").text
    assert all(f"head {h}" in svg for h in range(3)) and "attention" in svg
    assert ">c<" in svg and ">y<" in svg
    one = tg.viz.heatmap(weights[0], "abcd", "xy", "one").text
    assert "head 0" in one and "head 1" not in one


def test_the_tape_drawn_names_its_ops_and_after_backward_the_gradients():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    w = tg.tensor([3.0, 4.0], requires_grad=True)
    with tg.viz.tape_details():
        loss = (x * w).tanh().sum()
    drawing = tg.viz.tape(loss=loss, w=w, x=x)
    assert all(op in drawing.dot() for op in ("mul", "tanh", "sum"))
    assert "|grad|" not in drawing.dot()
    loss.backward()
    assert len(re.findall(r"\|grad\| =", drawing.dot())) >= 3
    assert drawing._repr_svg_().startswith("<svg")


def test_cpu_is_the_only_device_and_the_loss_module_is_the_function():
    x = tg.ones(2, device="cpu")
    assert x.to("cpu") is x and x.to(tg.float64).dtype == tg.float64
    assert nn.Linear(2, 2).to("cpu").weight.dtype == tg.float32
    with pytest.raises(ValueError, match="CPU only, not on 'cuda'"):
        tg.zeros(2, device="cuda")
    with pytest.raises(ValueError, match="CPU only"):
        x.to("cuda:0")
    logits, target = tg.randn(4, 5), tg.tensor([0, 1, -100, 4])
    loss = nn.CrossEntropyLoss(label_smoothing=0.1)(logits, target)
    assert loss.item() == F.cross_entropy(logits, target, label_smoothing=0.1).item()
