#!/usr/bin/env bash
# Mixed precision learns as float32 does: the dates task trained with --precision bf16 reaches
# the exact match of the same run in float32 (within a point, both at least 95%), a small
# language model its held-out loss (within 0.05 nats), and classify's sequence and tagging tasks
# their held-out accuracy (within a point, both at least 95%).
set -euo pipefail
train=$1
classify=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
held_out() { grep "held-out:" "$1" | sed 's/.*exact match \([0-9.]*\)%.*/\1/'; }
dates=(--task dates --steps 1500 --eval-every 1500)
"$train" "${dates[@]}" --out "$dir/fp32" > "$dir/fp32.log" 2>&1
"$train" "${dates[@]}" --out "$dir/bf16" --precision bf16 > "$dir/bf16.log" 2>&1
fp32=$(held_out "$dir/fp32.log") bf16=$(held_out "$dir/bf16.log")
echo "dates, exact match: float32 $fp32%, bfloat16 $bf16%"
awk -v a="$fp32" -v b="$bf16" 'BEGIN { d = a - b; exit !(a >= 95 && b >= 95 && d <= 1 && d >= -1) }'
if cmp -s "$dir/fp32/loss.tsv" "$dir/bf16/loss.tsv"; then
  echo "--precision bf16 trained the float32 run's losses"
  exit 1
fi

for i in $(seq 1 300); do
  echo "the cat sat on the mat $((i % 10))."
  echo "a dog ate the bone, and the bird sang."
done > "$dir/text.txt"
lm=(--task lm --data "$dir/text.txt" --d-model 64 --heads 2 --d-ff 128 --decoder-layers 2
    --block-size 24 --batch 16 --steps 300 --eval-every 300 --eval-batches 8 --lr 3e-3)
loss() { tail -1 "$1/eval.tsv" | cut -f2; }
"$train" "${lm[@]}" --out "$dir/lm32" > /dev/null 2>&1
"$train" "${lm[@]}" --out "$dir/lm16" --precision bf16 > /dev/null 2>&1
echo "language model, held-out loss: float32 $(loss "$dir/lm32"), bfloat16 $(loss "$dir/lm16")"
awk -v a="$(loss "$dir/lm32")" -v b="$(loss "$dir/lm16")" 'BEGIN { exit !(b - a <= 0.05 && a - b <= 0.05) }'

accuracy() { grep "^held-out" "$1" | sed 's/.* accuracy \([0-9.]*\)%.*/\1/'; }
for task in "" --tag; do
  "$classify" $task --out "$dir/classify32${task#--}" > "$dir/classify32.log" 2>&1
  "$classify" $task --out "$dir/classify16${task#--}" --precision bf16 > "$dir/classify16.log" 2>&1
  fp32=$(accuracy "$dir/classify32.log") bf16=$(accuracy "$dir/classify16.log")
  echo "classify ${task:-(sequences)}, held-out accuracy: float32 $fp32%, bfloat16 $bf16%"
  awk -v a="$fp32" -v b="$bf16" 'BEGIN { d = a - b; exit !(a >= 95 && b >= 95 && d <= 1 && d >= -1) }'
done
