#!/usr/bin/env bash
# Fault injection: kill -9 the trainer at random instants, at least 25 times, while it commits a
# checkpoint every step (about half of its time is spent saving). After every kill the run must
# load (translate decodes with it, its parts agree on the step) and hold no mix of two steps;
# resuming it to the end must give files bit-identical to a run that was never interrupted.
#   train_kill.sh TRAIN TRANSLATE
set -euo pipefail
train=$1
translate=$2
kills=25
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(--task copy --train-size 500 --valid-size 50 --eval-every 100000 --d-model 32 --d-ff 64
      --batch 16 --seed 5 --warmup 10 --steps 2000)
"$train" "${args[@]}" --save-every 0 --out "$dir/straight" > /dev/null 2>&1

run="$dir/killed"
RANDOM=7  # reproducible instants
killed=0 loaded=0 before_first=0
while ((killed < kills)); do
  if [[ -f $run/latest ]]; then
    "$train" --out "$run" --resume --save-every 1 --eval-every 100000 > /dev/null 2>&1 &
  else
    "$train" "${args[@]}" --save-every 1 --out "$run" --replace > /dev/null 2>&1 &
  fi
  pid=$!
  if ((before_first >= 3)) && [[ ! -f $run/latest ]]; then
    # a slow build (the sanitizers) or a busy machine starts slower than the instants below:
    # this start is killed once it has committed its first checkpoint (at most a minute)
    for _ in $(seq 600); do
      [[ -f $run/latest ]] && break
      sleep 0.1
    done
  else
    sleep "0.$(printf '%03d' $((20 + RANDOM % 300)))"
  fi
  if ! kill -9 "$pid" 2> /dev/null; then
    echo "the trainer ended before it was killed (cycle $((killed + 1))): raise --steps"
    exit 1
  fi
  wait "$pid" 2> /dev/null || true
  killed=$((killed + 1))
  if [[ ! -f $run/latest ]]; then
    before_first=$((before_first + 1))
    continue
  fi
  # the newest checkpoint loads, and its three step counts agree
  ckpt="$run/checkpoints/$(cat "$run/latest")"
  "$translate" --run "$run" "abc" > /dev/null
  step=$(sed -n 's/^ *"step": \([0-9]*\).*/\1/p' "$ckpt/trainer.json")
  [[ "$(basename "$ckpt")" == "step-$(printf '%08d' "$step")" ]] || {
    echo "kill $killed: $ckpt holds trainer.json of step $step"
    exit 1
  }
  loaded=$((loaded + 1))
done
echo "$killed kills: the run loaded after $loaded, $before_first came before the first checkpoint"
((loaded >= killed / 2)) || { echo "too few kills after a checkpoint to test anything"; exit 1; }

# resume to the end (no saves on the way: checkpoints do not depend on how often they are made)
"$train" --out "$run" --resume --save-every 0 --eval-every 100000 > /dev/null 2>&1
ckpt=checkpoints/step-00002000
for f in $ckpt/model.safetensors $ckpt/optimizer.safetensors $ckpt/trainer.json loss.tsv eval.tsv; do
  cmp "$dir/straight/$f" "$run/$f"
done
leftovers=$(find "$run" -name '*.tmp.*' | wc -l)
[[ $leftovers == 0 ]] || { echo "$leftovers temporaries left behind"; exit 1; }
echo "killed $killed times, resumed: bit-identical to the uninterrupted run"
