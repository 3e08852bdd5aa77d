"""tapegrad.metrics: corpus BLEU and chrF as sacreBLEU computes them by default, on lists of
strings (tapegrad/metrics/translation.h): references are one list, a line per hypothesis, or a
list of such lists."""
from tapegrad import _C


def bleu(hypotheses, references):
    """Corpus BLEU, 0 to 100 (sacreBLEU's 13a tokenisation, exponential smoothing)."""
    return _C.corpus_bleu(list(hypotheses), list(references))


def chrf(hypotheses, references):
    """Corpus chrF (character 6-grams, beta 2), 0 to 100."""
    return _C.corpus_chrf(list(hypotheses), list(references))
