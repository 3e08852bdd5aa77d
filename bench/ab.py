#!/usr/bin/python3
"""Two builds of the benchmark timed against each other on one workload: is a change faster?

    python3 bench/ab.py OLD_BENCH NEW_BENCH --workload mini-train-small [--iterations 300]
                        [--pairs 9] [--threads 2] [--precision bf16] [--new-precision bf16]
                        [--bf16-kernel fma]

Copy build/bench/bench aside before the change (cp build/bench/bench /tmp/bench_old), build
the change, and pass both. On a shared VM a workload's time wanders by more than most changes
move it (this project's 2-vCPU VMs: 5-30% over minutes), so one run of each says little. The
two binaries run in turns, in pairs, the order swapped every pair (old-new, new-old, ...) so a
drift within a pair falls on each side equally often; each pair gives a ratio new / old, and
the median of the ratios is the change's effect, which such drift moves least. Each side's
sorted times are printed too: a change that helps is lower at most ranks, not only at the
median. Every run gets compare_pytorch.py's malloc settings and its own warm-up (bench's).
One binary as both, with --new-precision bf16, times mixed precision against float32; with
--bf16-kernel, both run the bfloat16 kernel another CPU would choose (bench's flag).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

from compare_pytorch import MALLOC, cpu_name


def seconds(binary, args, precision):
    """One run's seconds per iteration, from bench's last line."""
    cmd = [binary, "--workload", args.workload, "--iterations", str(args.iterations),
           "--threads", str(args.threads), "--precision", precision]
    if args.bf16_kernel:
        cmd += ["--bf16-kernel", args.bf16_kernel]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         env=dict(os.environ, GLIBC_TUNABLES=MALLOC)).stdout
    match = re.search(r"seconds=([0-9.eE+-]+)", out.strip().splitlines()[-1])
    if not match:
        sys.exit(f"ab.py: no seconds= in the last line of {binary}'s output:\n{out}")
    return float(match.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--workload", required=True)
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--pairs", type=int, default=9)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--new-precision", choices=["fp32", "bf16"],
                   help="the new side's precision (default: --precision)")
    p.add_argument("--bf16-kernel", choices=["native", "fma", "emulated"])
    args = p.parse_args()
    precision = {"old": args.precision, "new": args.new_precision or args.precision}
    if args.pairs < 1 or args.iterations < 1:
        sys.exit("ab.py: --pairs and --iterations must be at least 1")
    for binary in (args.old, args.new):
        if not os.access(binary, os.X_OK):
            sys.exit(f"ab.py: {binary}: not an executable")
    times = {"old": [], "new": []}
    ratios = []
    for pair in range(args.pairs):
        order = ("old", "new") if pair % 2 == 0 else ("new", "old")
        got = {side: seconds(getattr(args, side), args, precision[side]) for side in order}
        for side in order:
            times[side].append(got[side])
        ratios.append(got["new"] / got["old"])
        print(f"pair {pair + 1}: old {got['old']:.6g} s, new {got['new']:.6g} s, "
              f"new / old {ratios[-1]:.3f}", flush=True)
    kernel = f" ({args.bf16_kernel} bf16 kernel)" if args.bf16_kernel else ""
    print(f"{os.cpu_count()} vCPUs of {cpu_name()}; {args.workload}, old {precision['old']}, "
          f"new {precision['new']}{kernel}, {args.threads} threads, {args.iterations} "
          f"iterations a run, {args.pairs} pairs")
    for side in ("old", "new"):
        print(f"{side} sorted: " + " ".join(f"{t:.6g}" for t in sorted(times[side])))
    print(f"new / old: median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, "
          f"max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
