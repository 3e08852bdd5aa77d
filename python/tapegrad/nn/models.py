"""tapegrad's C++ models as nn.Modules: MiniTransformer, LanguageModel, SequenceClassifier and
TokenClassifier. Each is the C++ model (its forward, backward and kernels are C++, the GIL
released); its parameters are the C++ model's own tensors under the C++ names, so an optimizer,
state_dict() or a gradcheck sees what the C++ code trains and checkpoints.

    model = tg.nn.MiniTransformer(src_vocab=40, tgt_vocab=40, d_model=64, heads=4)
    logits = model(src_ids, tgt_ids)            # [B, T, tgt_vocab]

The keyword arguments are the C++ config's fields (tapegrad/nn/transformer.h, language_model.h,
heads.h), with the same defaults; activation is "relu" or "gelu"."""
from tapegrad import _C
from tapegrad.nn.modules import Module, Parameter

__all__ = ["MiniTransformer", "LanguageModel", "SequenceClassifier", "TokenClassifier"]


class _CppModel(Module):
    _cpp = None

    def __init__(self, **config):
        super().__init__()
        self._adopt(self._cpp(**config))

    @classmethod
    def _wrap(cls, model):
        """A C++ model made elsewhere (a loaded run's) as this Module."""
        self = cls.__new__(cls)
        Module.__init__(self)
        self._adopt(model)
        return self

    def _adopt(self, model):
        object.__setattr__(self, "_model", model)
        self._parameters.clear()
        self._buffers.clear()
        for name, t in model.named_parameters():
            self._parameters[name] = Parameter._of(t)
        for name, t in model.named_buffers():
            self._buffers[name] = t

    def forward(self, *ids):
        return self._model.forward(*ids)

    def train(self, mode=True):
        self._model.train(mode)
        return super().train(mode)

    def to(self, dtype):
        """The C++ model's tensors converted (new tensors: make the optimizer after)."""
        self._model.to(dtype)
        self._adopt(self._model)
        return self


class MiniTransformer(_CppModel):
    """The encoder-decoder of the paper: forward(src_ids [B, S], tgt_ids [B, T]) -> logits
    [B, T, tgt_vocab], teacher-forced."""
    _cpp = _C._MiniTransformer


class LanguageModel(_CppModel):
    """The decoder-only language model: forward(ids [B, T]) -> logits [B, T, vocab]."""
    _cpp = _C._LanguageModel


class SequenceClassifier(_CppModel):
    """An encoder with a head on the mean of its states over the positions that are not
    padding: forward(ids [B, S]) -> logits [B, classes]."""
    _cpp = _C._SequenceClassifier


class TokenClassifier(_CppModel):
    """An encoder with a head on every position: forward(ids [B, S]) -> logits [B, S, classes]."""
    _cpp = _C._TokenClassifier
