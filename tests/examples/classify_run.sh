#!/usr/bin/env bash
# A classifier is kept and asked: classify writes a run folder (never over another run), resumes
# it bit-identically (in bf16 mixed precision too, which the run keeps), and classify --run
# predicts a label (or a tag per token) with its probability for texts given as arguments or on
# standard input; a text it cannot classify is named and the others still answered; a damaged
# classifier directory is refused naming the file and field, before the model is built.
#   classify_run.sh TRAIN TRANSLATE CLASSIFY
set -uo pipefail
classify=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/expect.sh"
cd "$dir"
small=(--steps 60 --save-every 20)

# --- a run folder, resumed bit for bit --------------------------------------------------------
"$classify" "${small[@]}" --out straight > straight.log 2>&1 || fail "the straight run: $(tail -3 straight.log)"
"$classify" "${small[@]}" --stop-after 30 --out resumed > /dev/null 2>&1 || fail "the stopped run"
[[ $(cat resumed/latest) == step-00000030 ]] || fail "the stopped run's latest is $(cat resumed/latest)"
"$classify" --out resumed --resume > /dev/null 2>&1 || fail "the resume"
for f in checkpoints/step-00000060/model.safetensors checkpoints/step-00000060/optimizer.safetensors \
    checkpoints/step-00000060/trainer.json loss.tsv; do
  cmp -s "straight/$f" "resumed/$f" || fail "$f differs after stopping at 30 and resuming"
done
# in mixed precision too, which the run keeps: a resume that asks for float32 is refused
"$classify" "${small[@]}" --precision bf16 --out bf16 > /dev/null 2>&1 || fail "the bf16 run"
"$classify" "${small[@]}" --precision bf16 --stop-after 30 --out bf16-resumed > /dev/null 2>&1 ||
  fail "the stopped bf16 run"
"$classify" --out bf16-resumed --resume > /dev/null 2>&1 || fail "the bf16 resume"
for f in checkpoints/step-00000060/model.safetensors loss.tsv; do
  cmp -s "bf16/$f" "bf16-resumed/$f" || fail "bf16: $f differs after stopping at 30 and resuming"
done
cmp -s straight/loss.tsv bf16/loss.tsv && fail "--precision bf16 trained the float32 run's losses"
expect 2 "--precision: the run has bf16, got fp32" -- "$classify" --out bf16-resumed --resume --steps 80 --precision fp32
grep -q "macro avg" straight.log && grep -q "confusion (rows expected, columns predicted)" straight.log ||
  fail "no per-class scores or confusion matrix: $(tail -12 straight.log)"
expect 2 "--lr: the run has 0.001, got 0.01" -- "$classify" --out resumed --resume --steps 80 --lr 0.01
expect 1 "straight: holds a run at step 60: --resume continues it" -- "$classify" "${small[@]}" --out straight
mkdir runs
"$classify" --steps 5 > /dev/null 2>&1 && "$classify" --steps 5 > /dev/null 2>&1 ||
  fail "two runs in the default folder"
[[ -f runs/classify/latest && -f runs/classify-2/latest ]] || fail "the second default run did not go to runs/classify-2"

# --- a resume checks what the run holds against itself -------------------------------------------
fresh_run() { rm -rf bad_run; cp -r resumed bad_run; last=bad_run/checkpoints/step-00000060; }
fresh_run; sed -i '1s/^/x/' bad_run/train.tsv
expect 1 "bad_run: train.tsv or valid.tsv is not the split $last/trainer.json was trained on" -- \
  "$classify" --out bad_run --resume --steps 80
fresh_run; cp bad_run/checkpoints/step-00000030/optimizer.safetensors "$last/"
expect 1 "$last/optimizer.safetensors: is at step 30, trainer.json at 60" -- "$classify" --out bad_run --resume --steps 80
fresh_run; cp bad_run/checkpoints/step-00000030/model.safetensors "$last/"
expect 1 "$last: trainer.json is at step 60, model.safetensors at 30" -- "$classify" --out bad_run --resume --steps 80
fresh_run; sed -i 's/"loss_log_bytes": [0-9]*/"loss_log_bytes": 0/' "$last/trainer.json"
expect 1 "bad_run/loss.tsv: $last/trainer.json's 'loss_log_bytes' 0 ends the log at step 0" -- \
  "$classify" --out bad_run --resume --steps 80
fresh_run; sed -i 's/"epoch_index": [0-9]*/"epoch_index": 0/' "$last/trainer.json"
expect 1 "$last/trainer.json: 'epoch_index' 0 is not an example from 1" -- "$classify" --out bad_run --resume --steps 80

# --- asked about new texts --------------------------------------------------------------------
out=$("$classify" --run straight "a b c k" "k l m n a") || fail "--run with arguments"
[[ $(grep -c $'^\(positive\|negative\|even\)\t[01]\.[0-9]\{4\}$' <<< "$out") == 2 ]] ||
  fail "--run: expected two 'label TAB probability' lines: $out"
out=$(printf 'a b\n\nk l\n' | "$classify" --run straight 2> err)
code=$?
[[ $code == 1 && $(grep -c . <<< "$out") == 2 && $(wc -l <<< "$out") == 3 ]] ||
  fail "--run on stdin with an empty line: exit $code, output: $out"
grep -q "classify: stdin:2: no tokens" err || fail "the empty line was not named: $(cat err)"
[[ $("$classify" --run straight --checkpoint 40 "a b c") != "" ]] || fail "--run --checkpoint 40"
[[ $("$classify" --run straight/checkpoints/step-00000060 "a b c") == $("$classify" --run straight "a b c") ]] ||
  fail "a checkpoint folder and its run answer differently"
expect 1 "straight: no checkpoint of step 7; it keeps 40, 60" -- "$classify" --run straight --checkpoint 7 "a"
expect 2 "--steps trains a run; --run only predicts" -- "$classify" --run straight --steps 5 "a"
expect 2 "texts to classify go with --run" -- "$classify" "a b c"
"$classify" --tag --steps 40 --out tags > /dev/null 2>&1 || fail "the tagging run"
out=$("$classify" --run tags "a b a c d")
[[ $out =~ ^(once|twice)( (once|twice)){4}$'\t'[0-9.]+( [0-9.]+){4}$ ]] || fail "--run on a tagger: $out"

# --- damaged classifier directories -----------------------------------------------------------
ckpt=straight/checkpoints/step-00000060
fresh() { rm -rf bad; cp -r "$ckpt" bad; }
fresh; sed -i 's/"d_model":64/"d_model":4096/' bad/config.json
expect 1 "bad/model.safetensors: its metadata 'config' is missing or differs from config.json" -- "$classify" --run bad "a"
fresh; sed -i 's/"heads":4/"heads":5/' bad/config.json
expect 1 "bad/config.json: 'd_model' 64 is not divisible by 'heads' 5" -- "$classify" --run bad "a"
fresh; sed -i 's/"layers":2/"layers":2,"extra":1/' bad/config.json
expect 1 "bad/config.json: unknown key 'extra'" -- "$classify" --run bad "a"
fresh; sed -i 's/"task":"sequence"/"task":"regression"/' bad/config.json
expect 1 "bad/config.json: 'task' must be one of \"sequence\", \"tokens\"" -- "$classify" --run bad "a"
fresh; echo extra >> bad/labels.txt
expect 1 "bad/labels.txt: names 4 classes, the model has 3" -- "$classify" --run bad "a"
fresh; printf 'positive\n\neven\n' > bad/labels.txt
expect 1 "bad/labels.txt: line 2 is empty" -- "$classify" --run bad "a"
fresh; rm bad/labels.txt; mkfifo bad/labels.txt
expect 1 "bad/labels.txt: not a regular file (a fifo)" -- "$classify" --run bad "a"

((fails == 0)) || { echo "$fails classifier-run cases failed"; exit 1; }
echo "classifier runs: kept, resumed bit for bit, asked; damaged ones refused"
