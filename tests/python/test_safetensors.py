"""tapegrad.safetensors: save_file and load_file under safetensors.torch's names, over the C++
reader and writer: a module's state round-trips exactly, a load validates and names the file,
and a failed save leaves the old file whole."""
import os

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn
from tapegrad.safetensors import load_file, save_file


def test_state_dict_round_trips_exactly(tmp_path):
    tg.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3))
    path = tmp_path / "model.safetensors"
    save_file(model.state_dict(), path, metadata={"note": "seed 3"})
    tg.manual_seed(4)
    other = nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3))
    other.load_state_dict(load_file(path))
    for name, t in model.state_dict().items():
        assert np.array_equal(other.state_dict()[name].numpy(), t.numpy()), name


def test_dtypes_views_and_order(tmp_path):
    x = tg.arange(12.0).view(3, 4)
    tensors = {"view": x.transpose(0, 1), "ids": tg.tensor([1, -2, 3]), "mask": tg.tensor([True, False]),
               "f64": tg.ones(2, dtype=tg.float64)}
    save_file(tensors, tmp_path / "t.safetensors")
    back = load_file(str(tmp_path / "t.safetensors"))
    assert sorted(back) == sorted(tensors)
    for name, t in tensors.items():
        assert back[name].dtype == t.dtype and np.array_equal(back[name].numpy(), t.numpy()), name


def test_errors_name_the_file(tmp_path):
    with pytest.raises(tg.Error, match="nope.safetensors"):
        load_file(tmp_path / "nope.safetensors")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\xff" * 20)
    with pytest.raises(tg.Error, match="bad.safetensors: header length"):
        load_file(bad)
    with pytest.raises(TypeError, match="dict of name -> tensor"):
        save_file([tg.ones(1)], tmp_path / "list.safetensors")
    with pytest.raises(ValueError, match="CPU"):
        load_file(bad, device="cuda")


def test_a_failed_save_keeps_the_old_file(tmp_path):
    path = tmp_path / "keep.safetensors"
    save_file({"a": tg.ones(2)}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError):
        save_file({"a": tg.ones(2), "b": "not a tensor"}, path)
    with pytest.raises(tg.Error):
        save_file({"a": tg.ones(2)}, tmp_path / "missing" / "x.safetensors")
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["keep.safetensors"]
