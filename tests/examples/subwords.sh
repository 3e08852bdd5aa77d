#!/usr/bin/env bash
# A user's own data: train --data with subword vocabularies learned by SentencePiece (bpe and
# unigram, shared and separate), translate and --resume reading them back, their errors naming
# the file; classify --data for labels and for tags, with the corpus reader's checks.
#   subwords.sh TRAIN TRANSLATE CLASSIFY TOUR
set -uo pipefail
train=$1 translate=$2 classify=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "subwords: $*"; exit 1; }

# a corpus whose words share pieces: source words, target the same words reversed in order;
# every source differs (the held-out part must not repeat a training source)
words=(walk walked walking talk talked talking jump jumped jumping the dog dogs cat cats)
for i in $(seq 0 599); do
  j=$((i * 389 % 2744))  # 600 of the 14^3 sentences, spread over them
  a=${words[j % 14]} b=${words[j / 14 % 14]} c=${words[j / 196]}
  printf '%s %s %s\t%s %s %s\n' "$a" "$b" "$c" "$c" "$b" "$a"
done > "$dir/pairs.tsv"
common=(--data "$dir/pairs.tsv" --steps 600 --warmup 30 --eval-every 600 --d-model 32 --d-ff 64
        --batch 64 --threads 1)

out=$("$train" "${common[@]}" --level bpe --vocab-size 40 --out "$dir/bpe" 2>&1) ||
  fail "bpe run failed: $out"
[[ $out == *"vocabularies 40 -> 40"* ]] || fail "bpe: expected 40 pieces a side: $out"
acc=$(grep -o 'held-out: exact match [0-9.]*' <<< "$out" | grep -o '[0-9.]*$')
awk -v a="$acc" 'BEGIN { exit !(a >= 90) }' || fail "bpe: exact match $acc%, expected >= 90%"
head -c 19 "$dir/bpe/checkpoints/step-00000600/src.vocab" | grep -q '^tapegrad-vocab bpe ' ||
  fail "bpe: the run's vocabulary is not a SentencePiece model"
# own held-out and test files: the run keeps both, and reports the test pairs at the end, again
# after a resume
head -n 500 "$dir/pairs.tsv" > "$dir/train.tsv"
sed -n 501,550p "$dir/pairs.tsv" > "$dir/valid.tsv"
sed -n 551,600p "$dir/pairs.tsv" > "$dir/test.tsv"
own=(--data "$dir/train.tsv" --valid "$dir/valid.tsv" --test "$dir/test.tsv" --level word
     --steps 40 --eval-every 40 --d-model 16 --d-ff 32 --batch 64 --threads 1 --out "$dir/own")
out=$("$train" "${own[@]}" 2>&1) || fail "own splits: $out"
[[ $out == *"500 training and 50 held-out examples"* && $out == *"test (50 pairs, best checkpoint): loss "*"BLEU "* ]] ||
  fail "own splits: $out"
cmp -s "$dir/valid.tsv" "$dir/own/valid.tsv" && cmp -s "$dir/test.tsv" "$dir/own/test.tsv" ||
  fail "own splits: the run does not keep the files given"
# the baseline it says: copying the held-out sources, as score scores them
cut -f1 "$dir/valid.tsv" > "$dir/valid.src"
cut -f2 "$dir/valid.tsv" > "$dir/valid.ref"
copy=$("$(dirname "$train")/score" --ref "$dir/valid.ref" "$dir/valid.src")
said="copying the source scores BLEU $(grep -o '^BLEU [0-9.]*' <<< "$copy" | cut -d' ' -f2), chrF \
$(grep -o 'chrF [0-9.]*' <<< "$copy" | cut -d' ' -f2) on the held-out pairs"
[[ $out == *"$said"* ]] || fail "own splits: expected '$said' ($copy): $out"
out=$("$train" --out "$dir/own" --resume --steps 60 --reschedule 2>&1) || fail "own resume: $out"
[[ $out == *"test (50 pairs, best checkpoint): "* ]] || fail "own splits: no test after the resume: $out"
# translate reads any checkpoint the run keeps, or a checkpoint folder itself
src=$(head -n 1 "$dir/test.tsv" | cut -f1)
"$translate" --run "$dir/own" --checkpoint 40 "$src" > /dev/null || fail "--checkpoint 40"
"$translate" --run "$dir/own/checkpoints/step-00000060" "$src" > /dev/null ||
  fail "a checkpoint folder as --run"
by_folder=$("$translate" --run "$dir/own/checkpoints/step-00000060" "$src")
by_run=$("$translate" --run "$dir/own" "$src")
[[ $by_folder == "$by_run" ]] || fail "the latest checkpoint read two ways differs: $by_folder, $by_run"
out=$("$translate" --run "$dir/own" --checkpoint 7 "$src" 2>&1) && fail "--checkpoint 7 accepted"
[[ $out == *"$dir/own: no checkpoint of step 7; it keeps 40, 60"* ]] || fail "--checkpoint 7: $out"
# two training pairs back through the saved vocabularies
mapfile -t pairs < <(head -n 2 "$dir/bpe/train.tsv")
got=$("$translate" --run "$dir/bpe" "${pairs[0]%%$'\t'*}" "${pairs[1]%%$'\t'*}") ||
  fail "translate failed: $got"
[[ $got == "${pairs[0]#*$'\t'}"$'\n'"${pairs[1]#*$'\t'}" ]] ||
  fail "translate: got '$got' for ${pairs[*]}"
out=$("$train" --out "$dir/bpe" --resume --steps 620 --reschedule 2>&1) ||
  fail "resume failed: $out"
[[ $out == *"resumed $dir/bpe at step 600"* ]] || fail "resume: $out"

out=$("$train" "${common[@]}" --level unigram --vocab-size 36 --shared-vocab --out "$dir/uni" 2>&1) ||
  fail "unigram run failed: $out"
[[ $out == *"vocabularies 36 -> 36"* ]] || fail "unigram: $out"
cmp -s "$dir/uni/checkpoints/step-00000600/src.vocab" "$dir/uni/checkpoints/step-00000600/tgt.vocab" ||
  fail "--shared-vocab: the two sides' vocabularies differ"

expect() {  # expect PROGRAM EXIT_CODE MESSAGE ARGS...
  local program=$1 code=$2 message=$3
  shift 3
  local out
  out=$("$program" "$@" 2>&1)
  local got=$?
  [[ $got == "$code" && $out == *"$message"* ]] ||
    fail "$(basename "$program") $*: expected exit $code and '$message', got exit $got: $out"
}
expect "$train" 1 "$dir/pairs.tsv (both sides): sentencepiece: Vocabulary size too high (5000)" \
  "${common[@]}" --level bpe --vocab-size 5000 --out "$dir/big"
[[ -e $dir/big ]] && fail "a failed vocabulary left $dir/big behind"
expect "$train" 2 "--vocab-size goes with --level bpe or unigram" "${common[@]}" --level char \
  --vocab-size 40
# the default size on a corpus that cannot fill it: fitted down and said; given, it is refused
# (above). The run resumes: its vocabularies hold fewer pieces than its --vocab-size.
small=(--data "$dir/pairs.tsv" --level unigram --steps 20 --warmup 2 --eval-every 20 --d-model 16
       --heads 2 --d-ff 32 --threads 1)
out=$("$train" "${small[@]}" --out "$dir/fitted" 2>&1) || fail "the default vocabulary size: $out"
[[ $out == *"$dir/pairs.tsv (both sides): 2000 subword pieces are more than it holds; using "* ]] ||
  fail "the fitted vocabulary size was not said: $out"
out=$("$train" --out "$dir/fitted" --resume --steps 30 --reschedule 2>&1) || fail "resuming it: $out"
expect "$train" 2 "--level: expected char, word, bpe or unigram, got 'pieces'" --level pieces
printf 'tapegrad-vocab bpe 12 0123456789abcdef\nnot a model!' > "$dir/bpe/checkpoints/step-00000620/src.vocab"
expect "$translate" 1 "$dir/bpe/checkpoints/step-00000620/src.vocab: the model's checksum is" \
  --run "$dir/bpe" --checkpoint latest "the dog"

# classify --data: text TAB label, and tokens TAB tags
for i in $(seq 0 399); do
  j=$((i * 389 % 2744))  # every text differs, as for pairs.tsv
  a=${words[j % 14]} b=${words[j / 14 % 14]} c=${words[j / 196]}
  label=$([[ $a == *ing || $b == *ing || $c == *ing ]] && echo going || echo done)
  printf '%s %s %s\t%s\n' "$a" "$b" "$c" "$label"
  printf '%s %s %s\t%s %s %s\n' "$a" "$b" "$c" "${a:0:1}" "${b:0:1}" "${c:0:1}" >> "$dir/tags.tsv"
done > "$dir/labels.tsv"
printf 'no tab here\n' >> "$dir/labels.tsv"
printf 'the dog\tt\n' >> "$dir/tags.tsv"
out=$("$classify" --data "$dir/labels.tsv" --level word --steps 150 --out "$dir/labels" 2>&1) ||
  fail "classify --data failed: $out"
[[ $out == *"skipped $dir/labels.tsv:401: no tab between source and target"* ]] ||
  fail "classify: the malformed line was not named: $out"
[[ $out == *"2 classes"* ]] || fail "classify: expected 2 classes: $out"
acc=$(grep -o 'held-out sequence accuracy [0-9.]*' <<< "$out" | grep -o '[0-9.]*$')
awk -v a="$acc" 'BEGIN { exit !(a >= 95) }' || fail "classify: accuracy $acc%, expected >= 95%"
out=$("$classify" --tag --data "$dir/tags.tsv" --steps 150 --out "$dir/tags" 2>&1) ||
  fail "classify --tag failed: $out"
[[ $out == *"skipped $dir/tags.tsv:401: 2 tokens but 1 tags"* ]] || fail "tags: $out"
acc=$(grep -o 'held-out token accuracy [0-9.]*' <<< "$out" | grep -o '[0-9.]*$')
awk -v a="$acc" 'BEGIN { exit !(a >= 95) }' || fail "classify --tag: accuracy $acc%, expected >= 95%"
expect "$classify" 1 "$dir/tags.tsv:401: 2 tokens but 1 tags" --tag --data "$dir/tags.tsv" --strict
expect "$classify" 1 "$dir/labels.tsv:401: no tab between source and target" --data "$dir/labels.tsv" --strict
expect "$classify" 2 "--tag: tags go with words, so --level is word" --tag --data "$dir/tags.tsv" --level bpe
expect "$classify" 2 "--level goes with --data" --level word
expect "$classify" 1 "$dir/labels.tsv: sentencepiece: Vocabulary size too high" \
  --data "$dir/labels.tsv" --level unigram --vocab-size 5000
exit 0
