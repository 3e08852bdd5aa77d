"""tapegrad.nn: modules in plain Python over the engine's ops, as torch.nn has them.

A Module registers the Parameters, Modules and buffers assigned to its attributes, under
dotted names (named_parameters()) that are the C++ modules' and checkpoints' names too. A
learner's own Module subclass records its ops on the tape like the library's.
"""
from tapegrad.nn import functional  # noqa: F401
from tapegrad.nn.models import (LanguageModel, MiniTransformer, SequenceClassifier,
                                TokenClassifier)
from tapegrad.nn.modules import (GELU, CrossEntropyLoss, Dropout, Embedding, LayerNorm, Linear,
                                 Module, ModuleList, Parameter, ReLU, Sequential)
from tapegrad.nn.transformer import (MultiheadAttention, TransformerEncoder,
                                     TransformerEncoderLayer)

__all__ = ["Parameter", "Module", "ModuleList", "Sequential", "Linear", "ReLU", "GELU",
           "Dropout", "Embedding", "LayerNorm", "CrossEntropyLoss", "MultiheadAttention",
           "TransformerEncoderLayer", "TransformerEncoder", "MiniTransformer", "LanguageModel", "SequenceClassifier",
           "TokenClassifier", "functional"]
