#!/usr/bin/python3
"""tapegrad and PyTorch, both driven from Python, on this machine (issue 71's speed from Python):

1. calls: the cost of one call of a small op from Python (a + b, x * 2.0, x.relu(), a @ b,
   x.sum(), x[1:3]) on [8] and [8, 8] float32 tensors, in nanoseconds, each library's.
2. python-mini-train-small, python-mini-train-base: a training step (forward, cross-entropy,
   backward, Adam) of the seed's MiniTransformer written once as Python Modules over a
   library's nn, functional and tensor names (bench/seed_models.py, the same source for both),
   at the shapes of bench's mini-train-small and mini-train-base.
3. cpp-model-mini-train-*: the same step with tapegrad's C++ MiniTransformer bound from Python
   (tapegrad.nn.MiniTransformer, tapegrad.optim.Adam), against build/bench/bench's C++ step of
   the same workload (its Trainer: batching, the step, Adam).

    PYTHONPATH=build/python /usr/bin/python3 bench/python_side_by_side.py [--iterations 5]
        [--bench build/bench/bench] [--markdown]

Each side runs in a process of its own, warmed up first, with glibc's malloc keeping freed
memory (compare_pytorch.py's MALLOC, for both); PyTorch runs once with 1 thread and once with 2
and keeps each number's best. A time is the median of --iterations steps. Numbers go in
bench/README.md, never into tests.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

from seed_models import seed_modules

MALLOC = "glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=268435456"
SHAPES = {"small": (100, 64, 256, 2, 12), "base": (8000, 512, 2048, 3, 64)}  # V C F L n
BATCH, HEADS = 32, 8


def median_seconds(step, iterations, warmup=3, warmup_seconds=0.25):
    start, done = time.perf_counter(), 0
    while done < warmup or time.perf_counter() - start < warmup_seconds:
        step()
        done += 1
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def call_costs(lib):
    """ns per call of each small op: the median of 7 timings of 20000 calls."""
    a, b = lib.rand(8), lib.rand(8)
    m = lib.rand(8, 8)
    ops = {"a + b": lambda: a + b, "x * 2.0": lambda: a * 2.0, "x.relu()": lambda: a.relu(),
           "a @ b [8, 8]": lambda: m @ m, "x.sum()": lambda: a.sum(), "x[1:3]": lambda: a[1:3]}
    out = {}
    for name, op in ops.items():
        n = 20000
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            for _ in range(n):
                op()
            times.append((time.perf_counter() - t0) / n * 1e9)
        out[name] = statistics.median(times)
    return out


def python_step(lib, shape, iterations):
    V, C, Fd, L, n = SHAPES[shape]
    lib.manual_seed(0)
    model = seed_modules(lib).Mini(V, C, HEADS, Fd, L, n)
    opt = lib.optim.Adam(model.parameters())
    src = lib.randint(1, V, (BATCH, n))
    tgt = lib.randint(1, V, (BATCH, n))
    F = lib.nn.functional

    def step():
        loss = F.cross_entropy(model(src, tgt).reshape(-1, V), tgt.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
    return median_seconds(step, iterations)


def cpp_model_step(shape, iterations):
    import tapegrad as tg
    V, C, Fd, L, n = SHAPES[shape]
    model = tg.nn.MiniTransformer(src_vocab=V, tgt_vocab=V, d_model=C, heads=HEADS, d_ff=Fd,
                                  encoder_layers=L, decoder_layers=L, dropout=0.1, max_len=n)
    opt = tg.optim.Adam(model.parameters())
    src = tg.randint(4, V, (BATCH, n))
    tgt = tg.randint(4, V, (BATCH, n))
    F = tg.nn.functional

    def step():
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1), ignore_index=0)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return median_seconds(step, iterations)


def side(name, iterations):
    """One side's numbers, as JSON on stdout: "torch-1", "torch-2" (its threads) or tapegrad."""
    if name.startswith("torch"):
        import torch
        torch.set_num_threads(int(name[-1]))
        lib = torch
    else:
        import tapegrad as lib
    out = {"calls": call_costs(lib)}
    for shape in SHAPES:
        out[f"python-mini-train-{shape}"] = python_step(lib, shape, iterations)
        if name == "tapegrad":
            out[f"cpp-model-mini-train-{shape}"] = cpp_model_step(shape, iterations)
    print(json.dumps(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--bench", default="build/bench/bench")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--side", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        return side(args.side, args.iterations)
    env = dict(os.environ, GLIBC_TUNABLES=MALLOC)
    results = {}
    for name in ("tapegrad", "torch-1", "torch-2"):
        results[name] = json.loads(subprocess.run(
            [sys.executable, __file__, "--side", name, "--iterations", str(args.iterations)],
            check=True, capture_output=True, text=True, env=env).stdout)
    one, two = results.pop("torch-1"), results.pop("torch-2")
    results["torch"] = {k: min(one[k], two[k]) for k in one if k != "calls"}
    results["torch"]["calls"] = {k: min(one["calls"][k], two["calls"][k]) for k in one["calls"]}
    cpp = {}
    for shape in SHAPES:
        out = subprocess.run([args.bench, "--workload", f"mini-train-{shape}", "--iterations",
                              str(args.iterations)], check=True, capture_output=True,
                             text=True, env=env).stdout
        cpp[shape] = float(out.split("seconds=")[1].split()[0])
    ours, theirs = results["tapegrad"], results["torch"]
    bar = "|" if args.markdown else ""
    print(f"{bar} small op from Python {bar} tapegrad ns {bar} PyTorch ns {bar} PyTorch / tapegrad {bar}")
    if args.markdown:
        print("|---|---:|---:|---:|")
    for op, ns in ours["calls"].items():
        t = theirs["calls"][op]
        print(f"{bar} {op} {bar} {ns:.0f} {bar} {t:.0f} {bar} {t / ns:.2f}x {bar}")
    print()
    print(f"{bar} training step from Python {bar} tapegrad ms {bar} PyTorch ms {bar} speedup {bar} "
          f"C++ bench ms {bar} bound / C++ {bar}")
    if args.markdown:
        print("|---|---:|---:|---:|---:|---:|")
    for shape in SHAPES:
        py_ours, py_theirs = ours[f"python-mini-train-{shape}"], theirs[f"python-mini-train-{shape}"]
        bound = ours[f"cpp-model-mini-train-{shape}"]
        print(f"{bar} Python-written Mini, {shape} {bar} {py_ours * 1e3:.1f} {bar} "
              f"{py_theirs * 1e3:.1f} {bar} {py_theirs / py_ours:.2f}x {bar} {bar} {bar}")
        print(f"{bar} tg.nn.MiniTransformer, {shape} {bar} {bound * 1e3:.1f} {bar} "
              f"{py_theirs * 1e3:.1f} {bar} {py_theirs / bound:.2f}x {bar} {cpp[shape] * 1e3:.1f} "
              f"{bar} {bound / cpp[shape]:.3f} {bar}")


if __name__ == "__main__":
    main()
