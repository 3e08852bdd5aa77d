#!/usr/bin/python3
"""Runs the benchmark workloads in tapegrad (build/bench/bench) and in PyTorch eager (Debian's
python3-torch) on this machine and prints one table; with --decode, the four decoding
workloads instead (tokens per second, tapegrad with and without its cache); with --bf16, the
training workloads in mixed precision (PyTorch's side in torch.autocast("cpu",
dtype=torch.bfloat16), the floor at tapegrad's bfloat16 product rate). The training
workloads: the encoder and the MiniTransformer of the performance issue, and the language
models of nanoGPT's shakespeare_char (lm-recipe, its CPU recipe; lm-large, its config), whose
PyTorch side is nanoGPT's model and train.py step.

    /usr/bin/python3 bench/compare_pytorch.py [--iterations 5] [--bench build/bench/bench]
                                              [--workloads mini-train-small,encoder-forward]
                                              [--rounds 1] [--decode | --bf16]
                                              [--markdown | --readme README.md]

PyTorch gets its best setting: each workload runs in a fresh process once with torch's own
threads at 1 and once at 2 (OpenBLAS at 2 both times), and the encoder workloads run both as
written out like ours and as nn.TransformerEncoder (whose eval forward is a fused fast path);
the fastest is kept. Debian's OpenBLAS 0.3.21 (PyTorch's BLAS here) does not know recent
AMD cores and may run its AVX2 kernels on a CPU with AVX-512; on such a CPU PyTorch's runs set
OPENBLAS_CORETYPE=SKYLAKEX, its AVX-512 kernels. Every process of both sides runs with glibc's
malloc keeping freed memory (GLIBC_TUNABLES, MALLOC below): with its default thresholds a
fresh PyTorch process returns each step's tensors to the system and faults their pages in
again the next step, unless some earlier large allocation happened to raise the thresholds
(tapegrad's allocator keeps its blocks either way).

--markdown prints the block the README shows (the machine, the date, the commit, the table);
--readme README.md writes it there, between the README's two benchmark markers.

A machine whose speed drifts over minutes (a shared VM) moves both sides' times; --rounds N
alternates the two sides N times per workload and reports each side's median time, and as the
speedup the median of the N paired ratios, which such drift moves least. A shared VM's two
vCPUs also at times sit apart, without a shared last-level cache, and a small model's
two-thread step is then up to 1.6x slower: each timed run, either side's, is bracketed by
probes (`bench --workload cores`) and taken again while one finds them apart (--retakes; the
table's note says how many were).

The matmul floor is the workload's matmul flops at the best sgemm rate on the workloads'
shapes: the issue's floor uses OpenBLAS's rate (two threads); tapegrad's own kernel is faster,
so the table also gives each workload against the floor at that rate. The rates are measured
again in every round, just before the workload, and each ratio to the floor is the median of
the rounds' ratios, each against its own round's rate: a rate measured in a fast minute and a
workload timed in a slow one would make a ratio the code does not have.
"""
import argparse
import contextlib
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import time

from seed_models import seed_modules

# Every timed run warms up for at least this long first: a step of a few milliseconds timed
# right after the other side's runs had kept both cores busy ran at up to 1.5x its steady time.
WARMUP_SECONDS = 0.25
# The bench binary (--bench), what the vCPUs delivered around each timed run, and how many runs
# were taken again because a probe found them apart (run_timed()).
BENCH = ["build/bench/bench"]
DELIVERED = []
RUNS = {"timed": 0, "retaken": 0, "kept apart": 0}
# A round trip between two threads above this many ns: the vCPUs sit apart (bench/README.md);
# a timed run with such a probe before or after it is taken again, up to RETAKES[0] times
# (--retakes).
APART_NS = 250
RETAKES = [3]
# glibc's malloc: blocks up to 256 MiB from the heap, and the heap not trimmed below that.
MALLOC = "glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=268435456"
# The README's generated block lies between these (--readme).
BEGIN, END = "<!-- benchmark table: bench/compare_pytorch.py --readme README.md -->", "<!-- end of the benchmark table -->"
# The same for the mixed-precision table (--bf16 --readme bench/README.md).
BF16_BEGIN = "<!-- bf16 table: bench/compare_pytorch.py --bf16 --readme bench/README.md -->"
BF16_END = "<!-- end of the bf16 table -->"
WORKLOADS = ["encoder-forward", "encoder-train", "mini-train-small", "mini-train-base",
             "lm-recipe", "lm-large"]
# The language models (nanoGPT's shakespeare_char: its CPU recipe, and its config): width,
# heads, layers, block, batch, dropout; 65 characters.
LM = {"lm-recipe": (128, 4, 4, 64, 12, 0.0), "lm-large": (384, 6, 6, 256, 64, 0.2)}
# Decoding (--decode): the date model of examples/train, 500 sources of 24 tokens in batches of
# 64, 11 tokens each, greedy and beam 4; the base model, 32 sources of 64 tokens, 16 and 128
# tokens greedy. <eos> is made impossible on both sides so every run does the same work.
DECODE = {"decode-dates-greedy": (51, 15, 64, 4, 256, 2, 500, 64, 24, 11, 1),
          "decode-dates-beam4": (51, 15, 64, 4, 256, 2, 500, 64, 24, 11, 4),
          "decode-base-16": (8000, 8000, 512, 8, 2048, 3, 32, 32, 64, 16, 1),
          "decode-base-128": (8000, 8000, 512, 8, 2048, 3, 32, 32, 64, 128, 1)}


def nanogpt():
    """nanoGPT's GPT class (model.py), its attention written out as it runs on torch 1.x: token
    and position embeddings, pre-norm blocks, a final LayerNorm and the output tied to the
    token embedding. bench/lm_side_by_side.py trains it too."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, C, H, p):
            super().__init__()
            self.H = H
            self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
            self.attn_dropout, self.resid_dropout, self.mlp_dropout = (nn.Dropout(p) for _ in range(3))
            self.gelu = nn.GELU()

        def forward(self, x, mask):
            B, T, C = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = self.attn_dropout(F.softmax(att.masked_fill(mask[:T, :T], float("-inf")), dim=-1))
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + self.resid_dropout(self.c_proj(y))
            return x + self.mlp_dropout(self.mlp_proj(self.gelu(self.c_fc(self.ln_2(x)))))

    class GPT(nn.Module):
        """nanoGPT's GPT: token and position embeddings, pre-norm blocks, a final LayerNorm and
        the output tied to the token embedding."""
        def __init__(self, V, C, H, L, T, p):
            super().__init__()
            self.wte, self.wpe, self.drop = nn.Embedding(V, C), nn.Embedding(T, C), nn.Dropout(p)
            self.h = nn.ModuleList(Block(C, H, p) for _ in range(L))
            self.ln_f = nn.LayerNorm(C)
            self.lm_head = nn.Linear(C, V, bias=False)
            self.lm_head.weight = self.wte.weight
            self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1))
            for name, p in self.named_parameters():  # nanoGPT's _init_weights
                if p.dim() >= 2:
                    ends = name.endswith(("c_proj.weight", "mlp_proj.weight"))
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L) if ends else 0.02)
                elif "ln_" not in name:  # biases; LayerNorms keep ones and zeros
                    nn.init.zeros_(p)

        def forward(self, idx):
            x = self.drop(self.wte(idx) + self.wpe(torch.arange(idx.shape[1])))
            for block in self.h:
                x = block(x, self.mask)
            return self.lm_head(self.ln_f(x))
    return GPT


def torch_worker(workload, iterations):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def amp():
        """The forward's precision: CPU autocast in bfloat16 (TORCH_PRECISION=bf16), or float32."""
        if os.environ.get("TORCH_PRECISION") == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    models = seed_modules(torch)
    EncLayer, Mini = models.EncLayer, models.Mini

    def decode_worker(Vs, Vt, C, H, Fd, L, sources, batch, S, steps, beam):
        """generate() written the fast way: keys and values cached per layer, every source and
        hypothesis of a batch in one decoder call per step, beams reordered by index_select."""
        model = Mini(max(Vs, Vt), C, H, Fd, L, 130)
        model.out_proj = nn.Linear(C, Vt)
        model.eval()
        with torch.no_grad():
            model.out_proj.bias[2] = -1e4  # no <eos>

        def attend(mha, q, k, v, pad):
            B, T, _ = q.shape
            q = mha.q_proj(q).view(B, T, mha.H, mha.D).transpose(1, 2)
            scores = q @ k.transpose(-2, -1) / math.sqrt(mha.D)
            if pad is not None:
                scores = scores.masked_fill(pad[:, None, None, :], float("-inf"))
            ctx = F.softmax(scores, -1) @ v
            return mha.out_proj(ctx.transpose(1, 2).reshape(B, T, C))

        def heads(mha, proj, x):
            B, T, _ = x.shape
            return proj(x).view(B, T, mha.H, mha.D).transpose(1, 2)

        def generate(src):
            with torch.no_grad():
                spad = src == 0
                m = model.embed(model.src_embed, src)
                for layer in model.enc:
                    m = layer(m, spad)
                N = src.shape[0]
                rows = torch.arange(N).repeat_interleave(beam) if beam > 1 else torch.arange(N)
                m, spad = m[rows], spad[rows]
                cross = [(heads(l.cross_attn, l.cross_attn.k_proj, m), heads(l.cross_attn, l.cross_attn.v_proj, m))
                         for l in model.dec]
                selfkv = [None] * len(model.dec)
                ids = torch.ones(len(rows), dtype=torch.long)
                score = torch.zeros(N, beam)
                if beam > 1:
                    score[:, 1:] = float("-inf")  # one hypothesis to start from
                for t in range(steps):
                    x = model.tgt_embed(ids[:, None]) * math.sqrt(C) + model.pe[t]
                    for i, l in enumerate(model.dec):
                        k, v = heads(l.self_attn, l.self_attn.k_proj, x), heads(l.self_attn, l.self_attn.v_proj, x)
                        if selfkv[i] is not None:
                            k, v = torch.cat([selfkv[i][0], k], 2), torch.cat([selfkv[i][1], v], 2)
                        selfkv[i] = (k, v)
                        x = l.norm1(x + attend(l.self_attn, x, k, v, None))
                        x = l.norm2(x + attend(l.cross_attn, x, *cross[i], spad))
                        x = l.norm3(x + l.ff(x))
                    logp = F.log_softmax(model.out_proj(x[:, 0]).double(), -1)
                    if beam == 1:
                        ids = logp.argmax(-1)
                        continue
                    total = (score.reshape(-1, 1) + logp).reshape(N, -1)
                    best, index = total.topk(2 * beam, -1)
                    score, index = best[:, :beam], index[:, :beam]  # no <eos>: the first beam
                    parent = (torch.arange(N)[:, None] * beam + index // Vt).reshape(-1)
                    ids = (index % Vt).reshape(-1)
                    selfkv = [(k[parent], v[parent]) for k, v in selfkv]

        g = torch.Generator().manual_seed(1)
        batches = [torch.randint(4, Vs, (min(batch, sources - i), S), generator=g)
                   for i in range(0, sources, batch)]

        def step():
            for b in batches:
                generate(b)
        return step

    def timed(step, warmup, n):
        # as bench's median_seconds: warm-up steps, and at least WARMUP_SECONDS of them
        start = time.perf_counter()
        done = 0
        while done < warmup or time.perf_counter() - start < WARMUP_SECONDS:
            step()
            done += 1
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    GPT = nanogpt()

    torch.manual_seed(0)
    if workload in LM:  # nanoGPT's train.py step: get_batch, forward, backward, clip, AdamW
        C, H, L, T, B, p = LM[workload]
        model = GPT(65, C, H, L, T, p)
        decay = [p for p in model.parameters() if p.dim() >= 2]  # nanoGPT's two groups
        rest = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay}, {"params": rest, "weight_decay": 0.0}],
                                lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
        data = torch.randint(0, 65, (180_000,))

        def step():
            ix = torch.randint(len(data) - T, (B,))
            x = torch.stack([data[i:i + T] for i in ix])
            y = torch.stack([data[i + 1:i + 1 + T] for i in ix])
            with amp():
                loss = F.cross_entropy(model(x).view(-1, 65), y.view(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        return timed(step, 3, iterations)
    if workload in DECODE:
        return timed(decode_worker(*DECODE[workload]), 1, iterations)
    if workload.startswith("encoder"):
        if os.environ["TORCH_VARIANT"] == "builtin":  # nn.TransformerEncoder and its fused eval path
            layer = nn.TransformerEncoderLayer(512, 8, 2048, 0.1, batch_first=True)
            enc = nn.TransformerEncoder(layer, 5, enable_nested_tensor=False)
        else:
            enc = nn.Sequential(*[EncLayer(512, 8, 2048, 0.1) for _ in range(5)])
        x = torch.randn(30, 200, 512)
        if workload == "encoder-forward":
            enc.eval()

            def step():
                with torch.no_grad(), amp():
                    enc(x)
        else:
            opt = torch.optim.Adam(enc.parameters())

            def step():
                with amp():
                    loss = enc(x).mean()
                loss.backward()
                opt.step()
                opt.zero_grad()
        return timed(step, 1, iterations)
    V, C, Fd, L, n = (100, 64, 256, 2, 12) if workload == "mini-train-small" else (8000, 512, 2048, 3, 64)
    model = Mini(V, C, 8, Fd, L, n)
    opt = torch.optim.Adam(model.parameters())
    src = torch.randint(1, V, (32, n))
    tgt = torch.randint(1, V, (32, n))

    def step():
        with amp():
            loss = F.cross_entropy(model(src, tgt).reshape(-1, V), tgt.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
    return timed(step, 3, iterations)


def run(cmd, env=None):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout


def cores_now():
    """What the vCPUs deliver to two threads now (bench --workload cores): the cores, and the
    round trip of a value between two threads in ns."""
    out = run([BENCH[0], "--workload", "cores"])
    trip = re.search(r"round_trip_ns=([\d.]+)", out)  # absent on one vCPU
    return (float(re.search(r"delivered=([\d.]+)", out).group(1)),
            float(trip.group(1)) if trip else None)


def run_timed(cmd, env=None):
    """Runs a timed process (either side's) between two probes of what the vCPUs deliver, kept
    in DELIVERED for the table. A shared VM's two vCPUs at times sit apart (a round trip of
    320-400 ns instead of 50-110: no shared last-level cache) for seconds to minutes, and every
    small two-thread run is then up to 1.6x slower while one thread is not: a run with a probe
    that found them apart is taken again, up to RETAKES[0] times, whichever side it times."""
    before = cores_now()
    DELIVERED.append(before)
    for attempt in range(RETAKES[0] + 1):
        out = run(cmd, env)
        after = cores_now()  # also the probe before a retake
        DELIVERED.append(after)
        RUNS["timed"] += 1
        apart = any(t is not None and t > APART_NS for _, t in (before, after))
        if not apart or attempt == RETAKES[0]:
            RUNS["kept apart"] += apart
            return out
        RUNS["retaken"] += 1
        before = after


def delivered_note():
    """The table's sentence on what the vCPUs delivered around its timed runs."""
    cores = [c for c, _ in DELIVERED]
    trips = [t for _, t in DELIVERED if t is not None]
    trip = (f", and a round trip between two threads took {min(trips):.0f}-{max(trips):.0f} ns"
            if trips else "")
    return (f"The vCPUs delivered {min(cores):.2f}-{max(cores):.2f} cores{trip}, at the probes "
            f"before and after each timed run (`bench --workload cores`); {RUNS['retaken']} of "
            f"{RUNS['timed']} runs were taken again, a probe having found the vCPUs apart (a round "
            f"trip over {APART_NS} ns), and {RUNS['kept apart']} kept so after {RETAKES[0]} retakes.")


def torch_best(workload, iterations, avx512, precision="fp32"):
    """PyTorch's fastest run of the workload over torch threads 1 and 2."""
    best = None
    for torch_threads in (1, 2):
        env = dict(os.environ, OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS=str(torch_threads),
                   TORCH_THREADS=str(torch_threads), TORCH_VARIANT="written",
                   TORCH_PRECISION=precision)
        if avx512:
            env["OPENBLAS_CORETYPE"] = "SKYLAKEX"
        out = run_timed([sys.executable, __file__, "--worker", workload, str(iterations)], env)
        res = dict(kv.split("=") for kv in out.split())
        res["setting"] = str(torch_threads)
        if best is None or float(res["seconds"]) < float(best["seconds"]):
            best = res
    return best


def decode_table(args, avx512):
    rows = []
    for w in DECODE:
        tokens = DECODE[w][6] * DECODE[w][9]
        rounds = []
        for _ in range(max(1, args.rounds)):
            ours = dict(kv.split("=") for kv in run_timed(
                [args.bench, "--workload", w, "--iterations", str(args.iterations)]).split()[1:])
            uncached = dict(kv.split("=") for kv in run_timed(
                [args.bench, "--workload", w, "--iterations", str(args.iterations), "--no-cache"]).split()[1:])
            rounds.append((ours, uncached, torch_best(w, args.iterations, avx512)))
        med = lambda i: statistics.median(float(r[i]["seconds"]) for r in rounds)
        speedup = statistics.median(float(r[2]["seconds"]) / float(r[0]["seconds"]) for r in rounds)
        rows.append((w, tokens / med(0), tokens / med(1), tokens / med(2),
                     statistics.mode(r[2]["setting"] for r in rounds), speedup,
                     1e3 * med(0) / DECODE[w][9], 1e3 * med(1) / DECODE[w][9],
                     max(int(r[0]["peak_rss_mb"]) for r in rounds),
                     max(int(r[2]["peak_rss_mb"]) for r in rounds)))
        print(f"done {w}", file=sys.stderr)
    print("| workload | tapegrad tokens/s (cached) | tapegrad tokens/s (uncached) | PyTorch tokens/s (torch threads) | speedup | ms per step, cached / uncached | peak RSS MB tapegrad / PyTorch |")
    print("|---|---|---|---|---|---|---|")
    for w, ours, unc, theirs, th, speedup, step, ustep, rss, trss in rows:
        print(f"| {w} | {ours:.0f} | {unc:.0f} | {theirs:.0f} ({th}) | {speedup:.2f}x | "
              f"{step:.2f} / {ustep:.2f} | {rss} / {trss} |")
    print(f"\n{delivered_note()}")


def bf16_table(args, avx512, peaks):
    """The training workloads in mixed precision: tapegrad's --precision bf16 against its own
    float32 and against PyTorch's CPU autocast in bfloat16 (its best torch threads), and against
    the bfloat16 floor: the workload's matmul flops at tapegrad's bfloat16 product rate."""
    rows = []
    chosen = args.workloads.split(",")
    for w in ("encoder-train", "mini-train-small", "mini-train-base", "lm-recipe", "lm-large"):
        if w not in chosen:
            continue
        rounds = []
        for _ in range(max(1, args.rounds)):
            rate = peaks()[2]
            ours = {p: dict(kv.split("=") for kv in run_timed(
                [args.bench, "--workload", w, "--iterations", str(args.iterations),
                 "--precision", p]).split()[1:]) for p in ("bf16", "fp32")}
            rounds.append((rate, ours, torch_best(w, args.iterations, avx512, "bf16")))
        flops = float(rounds[0][1]["bf16"]["gflops"]) * float(rounds[0][1]["bf16"]["seconds"])
        med = lambda f: statistics.median(f(*r) for r in rounds)
        rows.append((w, med(lambda r, o, t: float(o["bf16"]["seconds"])),
                     med(lambda r, o, t: float(o["fp32"]["seconds"]) / float(o["bf16"]["seconds"])),
                     med(lambda r, o, t: float(t["seconds"])),
                     statistics.mode(t["setting"] for _, _, t in rounds),
                     med(lambda r, o, t: float(t["seconds"]) / float(o["bf16"]["seconds"])),
                     med(lambda r, o, t: float(o["bf16"]["seconds"]) * r / flops)))
        print(f"done {w} (bf16)", file=sys.stderr)
    lines = ["| workload, bf16 | tapegrad s/iter | gain over its fp32 | PyTorch autocast s/iter (torch threads) | speedup | tapegrad / bf16 floor |",
             "|---|---|---|---|---|---|"]
    for w, ours, gain, theirs, th, speedup, floor in rows:
        lines.append(f"| {w} | {ours:.4f} | {gain:.2f}x | {theirs:.4f} ({th}) | {speedup:.2f}x | "
                     f"{floor:.2f} |")
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/bench/bench")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset")
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternate the two sides this many times; report medians")
    ap.add_argument("--decode", action="store_true",
                    help="the decoding workloads instead (tokens per second, cached and not)")
    ap.add_argument("--bf16", action="store_true",
                    help="the training workloads in mixed precision instead (bfloat16 products); "
                         "with --readme, into bench/README.md's bf16 block")
    ap.add_argument("--markdown", action="store_true",
                    help="print the README's block: the machine, the date, the commit, the table")
    ap.add_argument("--readme", metavar="FILE",
                    help="write that block into FILE between its benchmark markers")
    ap.add_argument("--retakes", type=int, default=3,
                    help="times a timed run is taken again while a probe finds the vCPUs apart "
                         "(0: never)")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    BENCH[0] = args.bench
    RETAKES[0] = args.retakes
    os.environ["GLIBC_TUNABLES"] = MALLOC  # for every process started from here on
    if args.worker:
        import torch
        torch.set_num_threads(int(os.environ["TORCH_THREADS"]))
        seconds = torch_worker(args.worker[0], int(args.worker[1]))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"seconds={seconds:.6f} peak_rss_mb={rss:.0f}")
        return
    with open("/proc/cpuinfo") as f:
        avx512 = " avx512f" in f.read()
    if args.decode:
        decode_table(args, avx512)
        return

    kernel = set()  # the bfloat16 product's kernel, as bench names it

    def sgemm_peaks():
        """The best product rate on the workloads' shapes now: (OpenBLAS's sgemm, tapegrad's,
        tapegrad's bfloat16 product)."""
        out = run_timed([args.bench, "--workload", "sgemm"])
        kernel.update(re.findall(r"bf16_kernel=(\w+)", out)[:1])
        return tuple(max(float(g) for g in re.findall(rf"{side}_gflops=([\d.]+)", out))
                     for side in ("openblas", "tapegrad", "bf16"))

    if args.bf16:
        table = bf16_table(args, avx512, sgemm_peaks)
        lines = [f"{os.cpu_count()} vCPUs of {cpu_name()}, {time.strftime('%Y-%m-%d')}, commit "
                 f"{commit()}, bfloat16 kernel {'/'.join(sorted(kernel))}: `bench/compare_pytorch.py "
                 f"--bf16 --iterations {args.iterations} --rounds {args.rounds}`. {delivered_note()}", ""] + table
        if args.readme:
            write_between_markers(args.readme, lines, BF16_BEGIN, BF16_END)
        else:
            print("\n".join(lines))
        return
    rows = []
    all_peaks = []
    for w in args.workloads.split(","):
        if w not in WORKLOADS:
            sys.exit(f"--workloads: unknown workload '{w}'")
        rounds = []  # (sgemm peaks, ours, PyTorch's best) per round
        for _ in range(max(1, args.rounds)):
            peaks = sgemm_peaks()
            ours = dict(kv.split("=") for kv in run_timed(
                [args.bench, "--workload", w, "--iterations", str(args.iterations)]).split()[1:])
            best = None
            variants = ("written", "builtin") if w.startswith("encoder") else ("written",)
            for variant in variants:
                for torch_threads in (1, 2):
                    env = dict(os.environ, OPENBLAS_NUM_THREADS="2",
                               OMP_NUM_THREADS=str(torch_threads),
                               TORCH_THREADS=str(torch_threads), TORCH_VARIANT=variant)
                    if avx512:
                        env["OPENBLAS_CORETYPE"] = "SKYLAKEX"
                    out = run_timed([sys.executable, __file__, "--worker", w, str(args.iterations)], env)
                    res = dict(kv.split("=") for kv in out.split())
                    res["setting"] = f"{torch_threads}{', built-in' if variant == 'builtin' else ''}"
                    if best is None or float(res["seconds"]) < float(best["seconds"]):
                        best = res
            rounds.append((peaks, ours, best))
            all_peaks.append(peaks)
        # GFLOP per iteration: the same in every round
        flops = float(rounds[0][1]["gflops"]) * float(rounds[0][1]["seconds"])
        med = lambda f: statistics.median(f(*r) for r in rounds)
        rows.append((w, med(lambda p, o, t: float(o["seconds"])),
                     med(lambda p, o, t: float(t["seconds"])),
                     statistics.mode(t["setting"] for _, _, t in rounds),
                     med(lambda p, o, t: float(t["seconds"]) / float(o["seconds"])),
                     flops / med(lambda p, o, t: p[0]),
                     med(lambda p, o, t: float(o["seconds"]) * p[0] / flops),
                     med(lambda p, o, t: float(t["seconds"]) * p[0] / flops),
                     med(lambda p, o, t: float(o["seconds"]) * p[1] / flops),
                     max(int(o["peak_rss_mb"]) for _, o, _ in rounds),
                     max(int(t["peak_rss_mb"]) for _, _, t in rounds)))
        print(f"done {w}", file=sys.stderr)
    span = lambda i: f"{min(p[i] for p in all_peaks):.1f}-{max(p[i] for p in all_peaks):.1f}"
    lines = ["| workload | tapegrad s/iter | PyTorch s/iter (torch threads, model) | speedup | matmul floor s (OpenBLAS rate) | tapegrad / floor | PyTorch / floor | tapegrad / floor at its own sgemm rate | peak RSS MB tapegrad / PyTorch |",
             "|---|---|---|---|---|---|---|---|---|"]
    for w, ours, theirs, th, speedup, floor, ratio, their_ratio, own_ratio, rss_ours, rss_theirs in rows:
        lines.append(f"| {w} | {ours:.4f} | {theirs:.4f} ({th}) | {speedup:.2f}x | {floor:.4f} | "
                     f"{ratio:.2f} | {their_ratio:.2f} | {own_ratio:.2f} | {rss_ours} / {rss_theirs} |")
    if args.markdown or args.readme:
        lines = [f"{os.cpu_count()} vCPUs of {cpu_name()}, {time.strftime('%Y-%m-%d')}, commit "
                 f"{commit()}: `bench/compare_pytorch.py --iterations {args.iterations} --rounds "
                 f"{args.rounds}`. sgemm on the workloads' shapes: tapegrad {span(1)}, OpenBLAS "
                 f"{span(0)} GFLOP/s; tapegrad's bfloat16 product {span(2)}. {delivered_note()}", ""] + lines
    else:
        lines = [f"\nsgemm peak on these shapes, measured before each round: OpenBLAS {span(0)} "
                 f"GFLOP/s, tapegrad {span(1)}, tapegrad's bfloat16 product {span(2)}. {delivered_note()}\n"] + lines
    if args.readme:
        write_between_markers(args.readme, lines, BEGIN, END)
    else:
        print("\n".join(lines))


def commit():
    """The repository's HEAD, short."""
    return run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short",
                "HEAD"]).strip()


def cpu_name():
    """The CPU as /proc/cpuinfo names it, with its family and whether it has AVX-512 (a VM's
    model name may say no more than "AMD EPYC")."""
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    avx512 = "AVX-512" if "avx512f" in info.get("flags", "").split() else "no AVX-512"
    return f"{info.get('model name', 'an unnamed CPU')} (family {info.get('cpu family', '?')}, {avx512})"


def write_between_markers(path, lines, begin_marker, end_marker):
    """Replaces what lies between the file's two markers with `lines`."""
    with open(path) as f:
        text = f.read()
    begin, end = text.find(begin_marker), text.find(end_marker)
    if begin < 0 or end < begin:
        sys.exit(f"--readme: {path} has no {begin_marker} ... {end_marker} block")
    text = text[:begin + len(begin_marker)] + "\n" + "\n".join(lines) + "\n" + text[end:]
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)

if __name__ == "__main__":
    main()
