"""No argument from Python aborts the interpreter: hostile calls (negative and huge sizes, wrong
types, bad dims, out-of-range ids, mismatched shapes, NaN, empty tensors) each raise a Python
exception. They run in a child interpreter, so that an abort or a crash fails this test instead
of killing pytest, and the child reports which call did not raise."""
import subprocess
import sys
import textwrap

CALLS = textwrap.dedent('''
    import numpy as np
    import tapegrad as tg
    from tapegrad import nn
    from tapegrad.nn import functional as F
    x = tg.ones(2, 3)
    ids = tg.tensor([[1, 2]])
    calls = {
        "zeros(-1)": lambda: tg.zeros(-1),
        "zeros(2**62, 2**62)": lambda: tg.zeros(2**62, 2**62),
        "ones(2**40)": lambda: tg.ones(2**40, 2**40),
        "full((2,), 'a')": lambda: tg.full((2,), "a"),
        "randint(5, 1)": lambda: tg.randint(5, 1, (2,)),
        "arange(0, 1, 0)": lambda: tg.arange(0, 1, 0),
        "arange(0, 1e30, 1e-30)": lambda: tg.arange(0.0, 1e30, 1e-30),
        "view(7)": lambda: x.view(7),
        "view(-2, 3)": lambda: x.view(-2, 3),
        "reshape(2**63 - 1)": lambda: x.reshape(2**63 - 1),
        "transpose(0, 5)": lambda: x.transpose(0, 5),
        "permute(0, 0)": lambda: x.permute(0, 0),
        "x[5]": lambda: x[5],
        "x[0, 0, 0]": lambda: x[0, 0, 0],
        "x['a']": lambda: x["a"],
        "x[1.5]": lambda: x[1.5],
        "x[::0]": lambda: x[::0],
        "x[0] = ones(5)": lambda: x.__setitem__(0, tg.ones(5)),
        "x @ x": lambda: x @ x,
        "x + ones(4)": lambda: x + tg.ones(4),
        "x + 'a'": lambda: x + "a",
        "x ** x": lambda: x ** x,
        "(-2) ** x": lambda: (-2) ** x,
        "x.sum(7)": lambda: x.sum(7),
        "x.softmax(3)": lambda: x.softmax(3),
        "x.chunk(0)": lambda: x.chunk(0),
        "x.split(0, 1)": lambda: x.split(0, 1),
        "x.squeeze(0)": lambda: x.squeeze(0),
        "x.masked_fill(x, 0)": lambda: x.masked_fill(x, 0.0),
        "x.item()": lambda: x.item(),
        "empty.max": lambda: tg.zeros(0).softmax(0).sum().item() + tg.zeros(0, 3).argmax(0).sum().item(),
        "tensor(object)": lambda: tg.tensor([object()]),
        "tensor(ragged)": lambda: tg.tensor([[1], [1, 2]]),
        "tensor(complex)": lambda: tg.tensor(np.zeros(2, dtype=complex)),
        "numpy() of requires_grad": lambda: tg.ones(2, requires_grad=True).numpy(),
        "backward of non-scalar": lambda: tg.ones(2, requires_grad=True).mul(2).backward(),
        "backward without grad": lambda: tg.ones(2).sum().backward(),
        "grad of unrelated": lambda: tg.autograd.grad([tg.ones(1, requires_grad=True).sum()],
                                                      [tg.ones(1, requires_grad=True)]),
        "hook returning str": lambda: (lambda t: (t.register_hook(lambda g: "a"),
                                                  (t * 2).sum().backward()))(
            tg.ones(2, requires_grad=True)),
        "embedding id out of range": lambda: F.embedding(tg.tensor([9]), tg.ones(3, 2)),
        "embedding negative id": lambda: F.embedding(tg.tensor([-1]), tg.ones(3, 2)),
        "cross_entropy bad target": lambda: F.cross_entropy(tg.ones(2, 3), tg.tensor([0, 7])),
        "cross_entropy float target": lambda: F.cross_entropy(tg.ones(2, 3), tg.ones(2)),
        "linear shapes": lambda: F.linear(x, tg.ones(4, 4)),
        "layer_norm shape": lambda: F.layer_norm(x, (4,)),
        "dropout p=2": lambda: F.dropout(x, 2.0),
        "attention heads 0": lambda: tg._C.attention(tg.ones(1, 2, 4), tg.ones(1, 2, 4),
                                                      tg.ones(1, 2, 4), 0),
        "attention heads 3": lambda: tg._C.attention(tg.ones(1, 2, 4), tg.ones(1, 2, 4),
                                                      tg.ones(1, 2, 4), 3),
        "MultiheadAttention(8, 3)": lambda: nn.MultiheadAttention(8, 3),
        "Linear(-1, 2)": lambda: nn.Linear(-1, 2),
        "MiniTransformer(src_vocab=-1)": lambda: nn.MiniTransformer(src_vocab=-1, tgt_vocab=5),
        "LanguageModel(d_model=2**40)": lambda: nn.LanguageModel(vocab=5, d_model=2**40),
        "LanguageModel forward bad ids": lambda: nn.LanguageModel(vocab=5, d_model=8, heads=2,
                                                                  d_ff=8, layers=1)(tg.tensor([[9]])),
        "LanguageModel forward too long": lambda: nn.LanguageModel(
            vocab=5, d_model=8, heads=2, d_ff=8, layers=1, block_size=2)(tg.tensor([[1, 1, 1]])),
        "SequenceClassifier all padding": lambda: nn.SequenceClassifier(
            vocab=5, classes=2, d_model=8, heads=2, d_ff=8, layers=1)(tg.tensor([[0, 0]])),
        "MiniTransformer float ids": lambda: nn.MiniTransformer(
            src_vocab=5, tgt_vocab=5, d_model=8, heads=2, d_ff=8)(tg.ones(1, 2), tg.ones(1, 2)),
        "load_run of a file": lambda: tg.load_run("/etc/passwd"),
        "load_run of nothing": lambda: tg.load_run("/nonexistent/run"),
        "Adam lr -1": lambda: tg.optim.Adam([nn.Parameter(tg.ones(1))], lr=-1.0),
        "SGD on int": lambda: tg.optim.SGD([tg.tensor([1])], lr=0.1).step(),
        "clip nan": lambda: tg.optim.clip_grad_norm_([tg.ones(1)], float("nan")),
        "gradcheck float32": lambda: tg.autograd.gradcheck(lambda t: t * 2,
                                                           (tg.ones(2, requires_grad=True),)),
        "set_num_threads": lambda: tg._C.set_num_threads(0) if hasattr(tg._C, "set_num_threads") else 1 / 0,
        "bleu mismatched": lambda: tg.metrics.bleu(["a"], ["a", "b"]),
        "state_dict wrong": lambda: nn.Linear(2, 2).load_state_dict({"weight": np.zeros((3, 3))}),
    }
    quiet = []
    for name, call in calls.items():
        print("calling", name, flush=True)
        try:
            call()
            quiet.append(name)
        except Exception:
            pass
    print("QUIET:", quiet)
''')



def test_hostile_arguments_raise_and_never_abort():
    child = subprocess.run([sys.executable, "-c", CALLS], capture_output=True, text=True,
                           timeout=120)
    last = [l for l in child.stdout.splitlines() if l.startswith("calling")][-1:]
    assert child.returncode == 0, f"the interpreter died ({child.returncode}) at {last}: " \
                                  f"{child.stderr[-2000:]}"
    quiet = eval(child.stdout.split("QUIET:")[1])
    assert not quiet, f"these did not raise: {quiet}"
