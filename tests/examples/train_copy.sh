#!/usr/bin/env bash
# The copy task with a small model reaches 100% exact match on held-out sequences in 500 steps.
set -euo pipefail
train=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$("$train" --task copy --steps 500 --eval-every 500 --train-size 5000 --valid-size 200 \
      --out "$dir/copy" 2>&1)
echo "$out" | grep "held-out:"
echo "$out" | grep -q "held-out: exact match 100.00%"
