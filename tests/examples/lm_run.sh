#!/usr/bin/env bash
# A language model on a text: train --task lm learns a small regular text, writes a run folder
# that resumes bit for bit, keeps the best checkpoint by loss and a report with samples; sample
# continues prompts from arguments, --prompt or standard input, the same for the same seed;
# each program refuses the other's model, and the flags that have no effect with --task lm.
#   lm_run.sh TRAIN TRANSLATE SAMPLE
set -uo pipefail
train=$1 translate=$2 sample=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/expect.sh"
cd "$dir"
for i in $(seq 1 300); do
  echo "the cat sat on the mat $((i % 10))."
  echo "a dog ate the bone, and the bird sang."
done > text.txt
small=(--task lm --data text.txt --d-model 32 --heads 2 --d-ff 64 --decoder-layers 2
       --block-size 24 --batch 8 --eval-every 40 --eval-batches 4 --save-every 40 --lr 3e-3)

# --- trained, stopped and resumed bit for bit -------------------------------------------------
"$train" "${small[@]}" --steps 240 --out straight > straight.log 2>&1 || fail "the straight run: $(tail -3 straight.log)"
"$train" "${small[@]}" --steps 240 --stop-after 120 --out resumed > /dev/null 2>&1 || fail "the stopped run"
"$train" --out resumed --resume > resumed.log 2>&1 || fail "the resume: $(tail -3 resumed.log)"
for f in checkpoints/step-00000240/model.safetensors checkpoints/step-00000240/optimizer.safetensors \
    checkpoints/step-00000240/trainer.json loss.tsv eval.tsv samples.tsv train.txt valid.txt; do
  cmp -s "straight/$f" "resumed/$f" || fail "$f differs after stopping at 120 and resuming"
done
# the text is regular: the held-out loss falls well below ln(24 characters) = 3.2 nats
loss=$(awk -F'\t' 'END { print $2 }' straight/eval.tsv)
awk -v l="$loss" 'BEGIN { exit !(l < 1.2) }' || fail "the held-out loss is $loss after 240 steps"
[[ $(cat straight/best) == step-* ]] || fail "no best checkpoint"
grep -q "bits per character" straight.log || fail "no bits per character: $(tail -5 straight.log)"
grep -q "<h2>Samples</h2>" straight/report.html && grep -q "step 40" straight/report.html ||
  fail "the report has no samples of the validations"
grep -q "step 40" resumed/report.html || fail "the resumed run's report lost the samples before it"
[[ $(head -c 5000 straight/train.txt straight/valid.txt | wc -c) -gt 0 ]] || fail "no text in the run"

# --- sampled ----------------------------------------------------------------------------------
a=$("$sample" --run straight --prompt "the cat" --max-new-tokens 60 --seed 3) || fail "sample --prompt"
b=$("$sample" --run straight --prompt "the cat" --max-new-tokens 60 --seed 3)
c=$("$sample" --run straight --prompt "the cat" --max-new-tokens 60 --seed 4)
[[ $a == "$b" && $a != "$c" && $a == "the cat"* ]] || fail "sampling is not the seed's alone: '$a' '$b' '$c'"
greedy=$("$sample" --run straight --greedy --prompt "a dog ate the" --max-new-tokens 12)
[[ $greedy == "a dog ate the bone, and"* ]] || fail "greedy continuation: '$greedy'"
long=$(printf 'the cat sat on the mat 3.%.0s' 1 2 3 4)  # past the block of 24 characters
[[ $("$sample" --run straight --prompt "$long" --max-new-tokens 30 | wc -c) -gt 100 ]] ||
  fail "a prompt longer than the block"
out=$(printf 'the\n\xff\na dog\n' | "$sample" --run straight --max-new-tokens 10 2> err)
code=$?
[[ $code == 1 && $(grep -c "^the\|^a dog" <<< "$out") == 2 ]] || fail "stdin with a bad line: exit $code, $out"
grep -q "sample: stdin:2: invalid UTF-8" err || fail "the bad line was not named: $(cat err)"
"$sample" --run straight --max-new-tokens 5 "the" $'\xff' "a dog" > /dev/null 2> err
grep -q "sample: argument 2: invalid UTF-8" err || fail "the bad argument was not named: $(cat err)"
[[ $("$sample" --run straight --checkpoint latest --greedy --prompt "the" --max-new-tokens 5) != "" ]] ||
  fail "--checkpoint latest"

# --- each program its own model; the flags of the other task refused -------------------------
expect 1 "holds a language model (train --task lm): examples/sample continues its text" -- \
  "$translate" --run straight "the cat"
"$train" --task copy --steps 3 --out copy > /dev/null 2>&1 || fail "a copy run"
expect 1 "is not a language model's: it has no \"task\": \"lm\"" -- "$sample" --run copy "x"
expect 2 "--task lm trains on a text: give it with --data" -- "$train" --task lm
expect 2 "--encoder-layers has no effect with --task lm" -- "$train" "${small[@]}" --encoder-layers 3
expect 2 "--block-size goes with --task lm" -- "$train" --task copy --block-size 8
expect 2 "a language model reads char, bpe or unigram, got 'word'" -- "$train" "${small[@]}" --level word
expect 2 "a language model keeps its best checkpoint by loss" -- "$train" "${small[@]}" --best-metric chrf
expect 2 "--block-size: the run has 24, got 32" -- "$train" --out straight --resume --steps 300 --block-size 32
cp -r straight edited
sed -i 's/"d-model": "32"/"d-model": "48"/' edited/checkpoints/step-00000240/trainer.json
expect 1 "disagrees with its trainer.json's flags: --d-model 48, but config.json's d_model 32" -- \
  "$train" --out edited --resume --steps 300
cp -r straight counted
sed -i 's/"epoch_index": 0/"epoch_index": 3/' counted/checkpoints/step-00000240/trainer.json
expect 1 "counted/checkpoints/step-00000240/trainer.json: 'epoch_index' is 3; a language model's is 0" -- \
  "$train" --out counted --resume --steps 300 --reschedule
head -c 100 text.txt > short.txt
expect 1 "short.txt: 90 training and 10 held-out tokens; each part needs at least 25" -- \
  "$train" "${small[@]/text.txt/short.txt}" --out short
printf 'abc\xffdef\n' > bad.txt
expect 1 "bad.txt: invalid UTF-8 at byte 3" -- "$train" "${small[@]/text.txt/bad.txt}" --out bad

# --- subwords ---------------------------------------------------------------------------------
"$train" "${small[@]}" --level bpe --vocab-size 40 --steps 40 --out bpe > bpe.log 2>&1 ||
  fail "a bpe run: $(tail -3 bpe.log)"
out=$("$sample" --run bpe --prompt "the cat" --max-new-tokens 20) || fail "sample of a bpe run"
[[ $out == "the cat"* ]] || fail "the bpe sample does not continue its prompt: $out"
exit $((fails > 0))
