#!/usr/bin/env bash
# Determinism and exact resume. Resume is exact: 30 steps of a 60-step run, save, then the rest after --resume gives
# bit-identical files to 60 uninterrupted steps with the same seed, and the same training
# loss curve, drawn over all 60 steps. Step 30 is mid-epoch (an
# epoch here is 8 batches) and dropout is on, so the data order and every dropout generator
# have to be restored.
set -euo pipefail
train=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(--task copy --train-size 500 --valid-size 50 --eval-every 20 --d-model 32 --d-ff 64 --seed 3 --warmup 10)
"$train" "${args[@]}" --steps 60 --out "$dir/straight" > /dev/null 2>&1
"$train" "${args[@]}" --steps 60 --stop-after 30 --out "$dir/resumed" > /dev/null 2>&1
"$train" --out "$dir/resumed" --resume --eval-every 20 > /dev/null 2>&1  # the run's own flags
ckpt=checkpoints/step-00000060
for f in $ckpt/model.safetensors $ckpt/optimizer.safetensors $ckpt/src.vocab $ckpt/tgt.vocab \
    $ckpt/trainer.json latest loss.tsv eval.tsv; do
  cmp "$dir/straight/$f" "$dir/resumed/$f"
done
# the resumed run draws the whole training and validation curves, not the steps since the resume
[[ $(grep '<path' "$dir/straight/loss.svg") == $(grep '<path' "$dir/resumed/loss.svg") ]]
[[ $(wc -l < "$dir/resumed/eval.tsv") == 3 ]]  # validations at steps 20, 40 and 60
echo "resume: bit-identical after 30 + 30 steps, the loss and validation curves whole"
# in mixed precision too, which the resume takes from the run's flags (width 64: the products
# of the linear layers go to the packed bfloat16 kernel)
mixed=(--task copy --train-size 500 --valid-size 50 --eval-every 20 --d-model 64 --d-ff 128
       --seed 3 --warmup 10 --precision bf16)
"$train" "${mixed[@]}" --steps 60 --out "$dir/bf16" > /dev/null 2>&1
"$train" "${mixed[@]}" --steps 60 --stop-after 30 --out "$dir/bf16-resumed" > /dev/null 2>&1
"$train" --out "$dir/bf16-resumed" --resume --eval-every 20 > /dev/null 2>&1
for f in $ckpt/model.safetensors $ckpt/optimizer.safetensors loss.tsv eval.tsv; do
  cmp "$dir/bf16/$f" "$dir/bf16-resumed/$f"
done
grep -q '^precision = bf16$' "$dir/bf16-resumed/flags.conf"
echo "resume in bfloat16: bit-identical"
# determinism: the same run again gives the same loss sequence and checkpoint
"$train" "${args[@]}" --steps 60 --out "$dir/again" > /dev/null 2>&1
for f in $ckpt/model.safetensors $ckpt/optimizer.safetensors loss.tsv; do
  cmp "$dir/straight/$f" "$dir/again/$f"
done
echo "determinism: two runs with one seed are bit-identical"
