"""The C++ models as nn.Modules (their parameters the C++ tensors, under the C++ names), trained
from Python with the optimizers, and the run folders of train --task lm and classify loaded and
used from Python as sample and classify use them. The programs' folder comes from ctest
(TAPEGRAD_EXAMPLES); without it the runs' tests skip."""
import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn import functional as F

EXAMPLES = os.environ.get("TAPEGRAD_EXAMPLES")
needs_examples = pytest.mark.skipif(not EXAMPLES, reason="TAPEGRAD_EXAMPLES names no folder")


def test_a_minitransformer_trains_from_python_with_the_cpp_names():
    model = nn.MiniTransformer(src_vocab=12, tgt_vocab=12, d_model=16, heads=2, d_ff=32,
                               encoder_layers=1, decoder_layers=1, dropout=0.0, seed=3)
    names = [n for n, _ in model.named_parameters()]
    assert "encoder.layers.0.self_attn.q_proj.weight" in names and "out_proj.weight" in names
    assert all(p.requires_grad and p.is_leaf for p in model.parameters())
    rng = np.random.default_rng(0)
    src = tg.tensor(rng.integers(3, 12, size=(8, 6)))
    tgt = tg.tensor(np.concatenate([np.ones((8, 1), dtype=np.int64), np.asarray(src)], 1))
    opt = tg.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        logits = model(src, tgt[:, :-1])
        assert logits.shape == (8, 6, 12)
        loss = F.cross_entropy(logits.reshape(-1, 12), tgt[:, 1:].reshape(-1), ignore_index=0)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    # the Module's parameters are the C++ model's: its state dict is what it computes with
    state = model.state_dict()
    other = nn.MiniTransformer(src_vocab=12, tgt_vocab=12, d_model=16, heads=2, d_ff=32,
                               encoder_layers=1, decoder_layers=1, dropout=0.0, seed=4)
    other.load_state_dict(state)
    with tg.no_grad():
        np.testing.assert_array_equal(np.asarray(other.eval()(src, tgt[:, :-1])),
                                      np.asarray(model.eval()(src, tgt[:, :-1])))


def test_the_other_models_and_a_gradcheck_of_one():
    lm = nn.LanguageModel(vocab=9, d_model=8, heads=2, d_ff=16, layers=1, block_size=6)
    assert lm(tg.tensor([[1, 2, 3]])).shape == (1, 3, 9)
    seq = nn.SequenceClassifier(vocab=9, classes=3, d_model=8, heads=2, d_ff=16, layers=1)
    assert seq(tg.tensor([[1, 2, 3, 0]])).shape == (1, 3)
    tags = nn.TokenClassifier(vocab=9, classes=4, d_model=8, heads=2, d_ff=16, layers=1,
                              activation="gelu")
    assert tags(tg.tensor([[1, 2, 3, 0]])).shape == (1, 4, 4)
    lm.double().eval()
    params = list(lm.parameters())
    assert all(p.dtype == tg.float64 for p in params)
    ids = tg.tensor([[1, 4, 2]])
    assert tg.autograd.gradcheck(lambda *ps: lm(ids).sum(), params[:3])
    with pytest.raises(TypeError, match="LanguageModel: unexpected keyword argument 'layer'"):
        nn.LanguageModel(vocab=9, layer=2)
    with pytest.raises(ValueError, match="activation is 'relu' or 'gelu', got 'tanh'"):
        nn.TokenClassifier(vocab=9, classes=2, activation="tanh")
    with pytest.raises(tg.Error, match="vocab"):
        nn.LanguageModel(vocab=0)


def run(program, *args):
    return subprocess.run([f"{EXAMPLES}/{program}", *args], check=True, capture_output=True,
                          text=True).stdout


@needs_examples
def test_a_language_model_run_samples_as_sample_does(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat.\na dog ate the bone.\n" * 200)
    folder = str(tmp_path / "lm")
    run("train", "--task", "lm", "--data", str(text), "--d-model", "16", "--heads", "2",
        "--d-ff", "32", "--decoder-layers", "1", "--block-size", "16", "--batch", "8",
        "--steps", "30", "--out", folder)
    lm = tg.load_run(folder)
    assert isinstance(lm, tg.LanguageModelRun) and isinstance(lm.model, nn.LanguageModel)
    prompts = ["the ", "a dog"]
    for flags, kwargs in [(["--seed", "5"], dict(seed=5)),
                          (["--greedy"], dict(greedy=True)),
                          (["--top-k", "3", "--temperature", "0.7"], dict(top_k=3, temperature=0.7))]:
        want = run("sample", "--run", folder, "--max-new-tokens", "20", *flags, *prompts)
        got = lm.sample(prompts, max_new_tokens=20, **kwargs)
        assert "".join(p + g + "\n" for p, g in zip(prompts, got)) == want
    with pytest.raises(TypeError):  # a str that is no UTF-8 (a lone surrogate)
        lm.sample(["a", "\udcff"])
    # Ctrl-C in a long call: a million tokens would take minutes; KeyboardInterrupt comes at once
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        lm.sample(["the "], max_new_tokens=1_000_000)
    assert time.monotonic() - start < 1.5
    assert lm.sample(["the "], max_new_tokens=5, seed=5) == lm.sample(["the "], max_new_tokens=5,
                                                                       seed=5)


@needs_examples
def test_a_classifier_run_classifies_as_classify_does(tmp_path):
    for tagging in (False, True):
        folder = str(tmp_path / ("tags" if tagging else "labels"))
        run("classify", *(["--tag"] if tagging else []), "--steps", "30", "--out", folder)
        c = tg.load_run(folder)
        assert isinstance(c, tg.ClassifierRun)
        assert isinstance(c.model, nn.TokenClassifier if tagging else nn.SequenceClassifier)
        texts = ["the cat sat", "a b c d a"]
        want = run("classify", "--run", folder, *texts).splitlines()
        got = c.predict(texts)
        assert [" ".join(labels) + "\t" + " ".join(f"{p:.4f}" for p in probs)
                for labels, probs in got] == want
        labels = c.classify(texts)
        assert labels == [tags if tagging else tags[0] for tags, _ in got]
        with pytest.raises(tg.Error, match="text 0: no tokens"):
            c.classify([""])
