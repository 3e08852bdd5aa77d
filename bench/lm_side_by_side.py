#!/usr/bin/python3
"""The language-model recipe side by side: nanoGPT's model and train.py loop in PyTorch
(Debian's python3-torch) on the same text and split as `train --task lm`, to set tapegrad's
held-out loss and wall-clock time beside the peer's.

    /usr/bin/python3 bench/lm_side_by_side.py data/web/web.txt [--steps 2000] [--threads 1]
        [--seed 1337] [--eval-batches 20] [--eval-every 250]

As nanoGPT's shakespeare_char (its CPU recipe: 4 layers, 4 heads, width 128, block 64, batch
12, lr 1e-3 decaying to 1e-4 over 2000 steps after 100 of warmup, AdamW with weight decay 0.1
on the weights and embeddings and beta2 0.99, clipping at 1.0, dropout 0): the characters of
the whole text, the first 90% for training, random blocks. As its train.py loop: every
--eval-every steps from step 0, estimate_loss (the mean loss over --eval-batches random
batches of each part) and, when the held-out loss is the best so far, a checkpoint of the
model and optimizer (torch.save, to a temporary folder). Prints the wall-clock time from the
model's creation to the last evaluation (the text's encoding, nanoGPT's prepare.py, is not
counted), the time of the training steps alone, and the last held-out estimate; tapegrad's
run prints its own (`train --task lm --data FILE`, whose defaults are this recipe; it
validates every 250 steps on 20 held-out batches). Runs with glibc's malloc tuned as
compare_pytorch.py runs PyTorch.
"""
import argparse
import math
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_pytorch import MALLOC, nanogpt  # noqa: E402


def main():
    if os.environ.get("GLIBC_TUNABLES") != MALLOC:  # PyTorch's best malloc (compare_pytorch.py)
        os.execve(sys.executable, [sys.executable] + sys.argv,
                  dict(os.environ, GLIBC_TUNABLES=MALLOC))
    ap = argparse.ArgumentParser()
    ap.add_argument("text")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 is its best here)")
    ap.add_argument("--seed", type=int, default=1337, help="torch.manual_seed (nanoGPT's)")
    ap.add_argument("--eval-batches", type=int, default=20)
    ap.add_argument("--eval-every", type=int, default=250)
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    text = open(args.text, encoding="utf-8").read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([index[c] for c in text], dtype=torch.long)
    n = int(0.9 * len(data))
    train, val = data[:n], data[n:]
    loop_start = time.perf_counter()  # nanoGPT's data step (prepare.py) is not train.py's
    C, H, L, T, B = 128, 4, 4, 64, 12
    lr, min_lr, warmup = 1e-3, 1e-4, 100
    model = nanogpt()(len(chars), C, H, L, T, 0.0)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay}, {"params": rest, "weight_decay": 0.0}], lr=lr,
                            betas=(0.9, 0.99), weight_decay=0.1)

    def batch(part):
        ix = torch.randint(len(part) - T, (B,))
        return (torch.stack([part[i:i + T] for i in ix]),
                torch.stack([part[i + 1:i + 1 + T] for i in ix]))

    def lr_at(it):  # nanoGPT's get_lr
        if it < warmup:
            return lr * (it + 1) / (warmup + 1)
        ratio = (it - warmup) / (args.steps - warmup)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)

    @torch.no_grad()
    def estimate_loss(part):  # nanoGPT's, one part
        model.eval()
        mean = sum(F.cross_entropy(model(x).view(-1, len(chars)), y.view(-1)).item()
                   for x, y in (batch(part) for _ in range(args.eval_batches)))
        model.train()
        return mean / args.eval_batches

    step_seconds, best, held_out, evaluations = 0.0, float("inf"), float("nan"), 0
    with tempfile.TemporaryDirectory() as out:
        for it in range(args.steps + 1):
            if it % args.eval_every == 0 or it == args.steps:
                estimate_loss(train)
                evaluations += 1
                held_out = estimate_loss(val)
                if held_out < best:
                    best = held_out
                    if it > 0:
                        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                                    "iter_num": it}, os.path.join(out, "ckpt.pt"))
            if it == args.steps:
                break
            start = time.perf_counter()
            for group in opt.param_groups:
                group["lr"] = lr_at(it)
            x, y = batch(train)
            loss = F.cross_entropy(model(x).view(-1, len(chars)), y.view(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            step_seconds += time.perf_counter() - start
    seconds = time.perf_counter() - loop_start
    print(f"{args.steps} steps and {evaluations} evaluations in "
          f"{seconds:.1f} s (the training steps alone "
          f"{step_seconds:.1f} s, {args.steps / step_seconds:.1f} steps/s), held-out loss "
          f"{held_out:.4f} ({held_out / math.log(2):.3f} bits per character); PyTorch "
          f"{torch.__version__}, torch threads {args.threads}")


if __name__ == "__main__":
    main()
