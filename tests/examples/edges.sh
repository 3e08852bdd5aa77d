#!/usr/bin/env bash
# The surfaces added since the third round of edge cases refuse bad input as clearly as the old
# ones: streams given as --ref (a FIFO nobody writes to, a directory, a device), values in a
# --config file, --batch-tokens, sampling flags that would have no effect, an empty prompt,
# a corpus of more labels than a classifier holds (refused at once, not after minutes), and a
# seed program's --weights file.
#   edges.sh TRAIN TRANSLATE CLASSIFY TOUR
set -uo pipefail
train=$1 translate=$2 classify=$3
bin=$(dirname "$4")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/expect.sh"
cd "$dir"
tiny=(--d-model 16 --heads 2 --d-ff 32 --warmup 1 --steps 4 --save-every 2 --eval-every 2)

# --- --ref and score's files: a regular file or a pipe; nothing else, and no hang -------------
"$train" --task copy --train-size 100 --valid-size 10 "${tiny[@]}" --out copy > /dev/null 2>&1 ||
  fail "the copy run"
mkfifo ref.fifo
mkdir adir
: > empty.txt
echo x > x  # score's hypothesis file x, translate's source x
for program in "$bin/score" "$translate --run copy"; do
  expect 1 "ref.fifo: a fifo nobody wrote to within 10 s" -- $program --ref ref.fifo x
  expect 1 "adir: not a regular file or a pipe (a directory)" -- $program --ref adir x
  expect 1 "/dev/zero: not a regular file or a pipe (a character device)" -- $program --ref /dev/zero x
  expect 1 "empty.txt: 0 reference lines for 1" -- $program --ref empty.txt x
done
expect 1 "adir: not a regular file or a pipe (a directory)" -- "$bin/score" --ref empty.txt adir
[[ $("$bin/score" --ref <(echo "a b c d") <(echo "a b c d")) == "BLEU 100.00 "* ]] ||
  fail "score of two pipes"
[[ $("$translate" --run copy --ref <(sleep 1; echo "ab") "ab" 2>&1) == *"chrF"* ]] ||
  fail "translate --ref of a pipe whose writer is slow"
timeout 30 bash -c 'sleep 1; echo "a b c d" > ref.fifo' &
[[ $("$bin/score" --ref ref.fifo <(echo "a b c d")) == "BLEU 100.00 "* ]] ||
  fail "score of a FIFO whose writer comes later"
wait

# --- --config files: every value read as the flag reads it, naming the file -------------------
conf() { printf '%s\n' "task = copy" "train-size = 50" "valid-size = 5" "$@" > bad.conf; }
conf "pre-norm = yes"
expect 2 "--pre-norm (saved in bad.conf): expected true or false, got 'yes'" -- \
  "$train" --config bad.conf "${tiny[@]}" --out r1
conf "steps ="
expect 2 "--steps (saved in bad.conf): needs a value" -- "$train" --config bad.conf --out r2
conf 'steps = ""'
expect 2 "--steps (saved in bad.conf): needs a value" -- "$train" --config bad.conf --out r3
conf "pre-norm = true" 'valid = ""'
expect 0 "" -- "$train" --config bad.conf "${tiny[@]}" --out r4  # "": a file flag left unset
grep -qx "pre-norm = true" r4/flags.conf || fail "flags.conf: $(cat r4/flags.conf)"
[[ ! -e r1 && ! -e r2 && ! -e r3 ]] || fail "a refused config made a run folder"

# --- --batch-tokens must hold the longest pair --max-len allows -------------------------------
printf 'in %d\tout %d\n' $(seq 1 60 | sed 's/.*/& &/') > pairs.tsv
expect 2 "--batch-tokens 1: a batch must hold a pair as long as --max-len 128 allows; give at least 128" -- \
  "$train" --data pairs.tsv --batch-tokens 1 --out r5
expect 2 "--batch-tokens 40: a batch must hold a pair as long as --max-len 64" -- \
  "$train" --data pairs.tsv --batch-tokens 40 --max-len 64 --out r6
expect 0 "" -- "$train" --data pairs.tsv --level char --batch-tokens 64 --max-len 64 "${tiny[@]}" --out r7

# --- sample: flags without effect refused; an empty prompt starts from a line break ------------
for i in $(seq 1 200); do echo "the cat sat on the mat $((i % 10))."; done > text.txt
"$train" "${tiny[@]}" --task lm --data text.txt --decoder-layers 1 --block-size 8 --batch 4 \
  --eval-batches 1 --out lm > /dev/null 2>&1 || fail "the language model's run"
expect 2 "--batch 12, --heads 4, --decoder-layers 4 and --block-size 65536: attention's weights alone take 3072.0 GiB a step" -- \
  "$train" --task lm --data text.txt --block-size 65536 --out r8
for flag in "--temperature 0.5" "--top-k 3" "--top-p 0.5"; do
  expect 2 "${flag%% *} has no effect with --greedy" -- "$bin/sample" --run lm --greedy $flag
done
out=$("$bin/sample" --run lm --prompt "" --max-new-tokens 5 --seed 1 2>&1) || fail "--prompt '': $out"
out=$("$bin/sample" --run lm --prompt --max-new-tokens 5 2>&1) || fail "--prompt alone: $out"

# --- a classifier's labels: at most 4096, refused at once ------------------------------------
for i in $(seq 1 5000); do printf 'a b %d\tl%d\n' "$i" "$i"; done > labels.tsv
start=$SECONDS
expect 1 "labels.tsv: more than 4096 distinct labels, the most a classifier here has" -- \
  "$classify" --data labels.tsv --steps 1 --out c1
((SECONDS - start < 30)) || fail "the labels were refused after $((SECONDS - start)) s"
for i in $(seq 1 400); do printf 'a b %d\tl%d\n' "$i" "$((i % 40))"; done > forty.tsv
out=$("$classify" --data forty.tsv --steps 2 --out c2 2>&1) || fail "40 labels: $out"
[[ $out == *"confusion matrix of 40 classes not printed (more than 32)"* ]] ||
  fail "40 labels: the confusion matrix: ${out: -300}"

# --- a seed program's --weights: a notebook's file, validated and named -----------------------
header='{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
printf "\\$(printf %03o ${#header})\\0\\0\\0\\0\\0\\0\\0%s\\0\\0\\200\\77" "$header" > one.st
expect 1 "one.st: no tensor 'input' (an input)" -- "$bin/seeds/seed_003_encoder_stack" --weights one.st
expect 1 "x.st: cannot open" -- "$bin/seeds/seed_003_encoder_stack" --weights x.st
expect 1 "empty.txt: " -- "$bin/seeds/seed_001_mini_transformer" --weights empty.txt

((fails == 0)) || { echo "$fails edge cases failed"; exit 1; }
echo "edges: every new surface refuses bad input, naming the flag or file"
