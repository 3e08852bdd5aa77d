"""A run trained by examples/train, loaded and decoded from Python as translate decodes it, and
the corpus scorers on lists of strings. The programs' folder comes from ctest
(TAPEGRAD_EXAMPLES); without it the run's test skips."""
import os
import subprocess

import pytest

import tapegrad as tg

EXAMPLES = os.environ.get("TAPEGRAD_EXAMPLES")


@pytest.mark.skipif(not EXAMPLES, reason="TAPEGRAD_EXAMPLES names no build/examples folder")
def test_a_run_from_train_translates_as_translate_does(tmp_path):
    run = str(tmp_path / "copy")
    subprocess.run([f"{EXAMPLES}/train", "--task", "copy", "--train-size", "200", "--valid-size",
                    "10", "--d-model", "16", "--heads", "2", "--d-ff", "32", "--steps", "40",
                    "--warmup", "2", "--out", run], check=True, capture_output=True)
    sources = ["abc", "hello world", "x"]
    for beam in (1, 3):
        want = subprocess.run([f"{EXAMPLES}/translate", "--run", run, "--beam", str(beam)] +
                              sources, check=True, capture_output=True, text=True).stdout
        assert tg.load_run(run).translate(sources, beam=beam) == want.splitlines()
    translator = tg.load_run(run, checkpoint="latest")
    assert translator.step == 40 and translator.checkpoint.endswith("step-00000040")
    with pytest.raises(tg.Error, match="translate: source 1: 0 tokens"):
        translator.translate(["a", ""])
    with pytest.raises(tg.Error, match="no such folder"):
        tg.load_run(str(tmp_path / "none"))


def test_corpus_scores_on_lists_of_strings():
    assert tg.metrics.bleu(["the cat sat on the mat"], ["the cat sat on the mat"]) == pytest.approx(100)
    assert tg.metrics.chrf(["abc"], [["abc"], ["xyz"]]) == pytest.approx(100)
    assert 0 < tg.metrics.bleu(["the cat sat on a mat"], ["the cat sat on the mat"]) < 100
    with pytest.raises(tg.Error):
        tg.metrics.bleu(["a", "b"], ["a"])
