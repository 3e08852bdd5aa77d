"""Tensors by name in a safetensors file, under safetensors.torch's names: save_file(tensors,
filename, metadata=None) and load_file(filename). The C++ engine reads and writes them
(tapegrad/io/safetensors.h): a save is atomic, so a failure never leaves half a file in the
old one's place, and a load validates the whole header before it allocates, naming the file and
the tensor in its errors (tapegrad.Error). PyTorch's safetensors reads what this writes."""
import os

from tapegrad import _C

__all__ = ["save_file", "load_file"]


def save_file(tensors, filename, metadata=None):
    """Writes a dict of name -> tensor to filename; metadata is a dict of str -> str."""
    if not isinstance(tensors, dict):
        raise TypeError(f"save_file: tensors must be a dict of name -> tensor, got {type(tensors).__name__}")
    _C._save_file(list(tensors.items()), os.fspath(filename), dict(metadata or {}))


def load_file(filename, device="cpu"):
    """The dict of name -> tensor that filename holds, in the file's order."""
    if device != "cpu":
        raise ValueError(f"load_file: tapegrad's tensors live on the CPU, not {device!r}")
    return dict(_C._load_file(os.fspath(filename)))
