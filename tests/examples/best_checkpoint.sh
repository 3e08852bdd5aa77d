#!/usr/bin/env bash
# The best checkpoint and early stopping: a run keeps `best` (by --best-metric) beside `latest`
# and only --keep-checkpoints others, translate and the test set use the best (translate's outputs
# stopping at a length tied to their source), --patience stops
# the run once that many validations in a row are no better, and a resume of a run that stopped
# so is refused until the patience is raised. Under mpirun every process stops at the same step
# (train_mpi.sh).
#   best_checkpoint.sh TRAIN TRANSLATE
set -uo pipefail
train=$1
translate=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/expect.sh"
cd "$dir"
args=(--task reverse --train-size 300 --valid-size 30 --d-model 16 --heads 2 --d-ff 32 --seed 2
      --warmup 5 --eval-every 10 --save-every 20)
kept() { (cd "$1/checkpoints" && echo step-*); }

# --- exact match stays at 0 for the first validations: the first is the best, then patience ---
expect 0 "stopping early at step 30: 2 validations in a row no better than the best, exact match 0.00% at step 10 (--patience 2)" -- \
  "$train" "${args[@]}" --steps 200 --best-metric exact --patience 2 --out stopped
[[ $(cat stopped/latest) == step-00000030 ]] || fail "the stopped run's latest is $(cat stopped/latest)"
[[ $(cat stopped/best) == step-00000010 ]] || fail "best is $(cat stopped/best), not step 10"
[[ $(kept stopped) == "step-00000010 step-00000020 step-00000030" ]] ||
  fail "the stopped run keeps $(kept stopped)"
[[ $(grep -c . stopped/loss.tsv) == 30 ]] || fail "the stopped run logged $(grep -c . stopped/loss.tsv) steps"
# translate loads the best by default, and --checkpoint latest the other
[[ $("$translate" --run stopped "a b c d") == $("$translate" --run stopped --checkpoint 10 "a b c d") ]] ||
  fail "translate's default is not the best checkpoint"
expect 2 "the run in stopped stopped early at step 30: its last 2 validations were no better than the best, at step 10; give a larger --patience" -- \
  "$train" --out stopped --resume
expect 0 "resumed stopped at step 30" -- "$train" --out stopped --resume --patience 0
[[ $(cat stopped/latest) == step-00000200 ]] || fail "the resumed run's latest is $(cat stopped/latest)"

# --- chrF rises: the best follows the newest validation; one checkpoint kept besides ----------
expect 0 "best checkpoint: chrF" -- "$train" "${args[@]}" --steps 80 --keep-checkpoints 1 --out rising
best=$(cat rising/best)
step=$((10#${best#step-}))
grep -q "\"step\": $step," "rising/checkpoints/$best/trainer.json" || fail "best names $best"
awk -F'\t' -v s="$step" '$1 == s { b = $6 } { if ($6 > m) m = $6 } END { exit b != m }' rising/eval.tsv ||
  fail "$best is not the step of the highest chrF in eval.tsv"
for c in $(kept rising); do
  [[ $c == step-00000080 || $c == "$best" ]] || fail "--keep-checkpoints 1 kept $c"
done

# --- translate stops each output at --max-len-factor times its source's tokens, plus 10 -------
long="a b c d e f g h i j a b"  # 23 characters
for beam in 1 3; do
  out=$("$translate" --run rising --beam $beam --max-len-factor 0 "$long" "a")
  [[ $(head -1 <<< "$out" | wc -m) -le 11 ]] || fail "beam $beam, factor 0: '$(head -1 <<< "$out")' is over 10 characters"
done
out=$("$translate" --run rising "$long")
[[ $(wc -m <<< "$out") -gt 11 ]] || fail "factor 2: '$out' was cut"

# --- the test set is scored with the best checkpoint, not the last -----------------------------
for i in $(seq 1 40); do printf '%s\t%s\n' "w$i x" "x w$i"; done > pairs.tsv
head -8 pairs.tsv > test.tsv
out=$("$train" --data pairs.tsv --test test.tsv --level word --d-model 16 --heads 2 --d-ff 32 \
      --warmup 2 --steps 40 --eval-every 10 --best-metric loss --out own 2>&1) || fail "the run with --test"
best=$(cat own/best)
[[ $out == *"test (8 pairs, best checkpoint): "* ]] || fail "no test line: ${out: -400}"
[[ $best != step-00000040 ]] || echo "note: the last step was the best, so the test's model is not told apart"

expect 2 "--best-metric: expected loss, bleu, chrf, exact or accuracy, got 'f1'" -- "$train" --best-metric f1
expect 2 "--keep-checkpoints: " -- "$train" --keep-checkpoints 0

((fails == 0)) || { echo "$fails best-checkpoint cases failed"; exit 1; }
echo "best checkpoint: kept, translated, tested; early stopping stops and refuses to resume"
