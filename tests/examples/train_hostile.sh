#!/usr/bin/env bash
# Hostile files and flags against train and translate, one class at a time: special files given
# as data, damaged and inconsistent checkpoints, configs of the wrong type or size, files that
# are not train's to overwrite. Each must end in an error that names the file (or flag) and
# the line or field, within a time limit (no hang), with exit code 1 or 2 (no crash).
#   train_hostile.sh TRAIN TRANSLATE CLASSIFY
set -uo pipefail
train=$1
translate=$2
classify=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/expect.sh"
args=(--task copy --train-size 200 --valid-size 20 --eval-every 100000 --d-model 16 --heads 2
      --d-ff 32 --seed 1 --warmup 2 --steps 8 --save-every 4)

# --- data files that are not regular files, or too long -------------------------------------
mkfifo "$dir/fifo.tsv"
expect 1 "$dir/fifo.tsv: not a regular file (a fifo)" -- "$train" --data "$dir/fifo.tsv" --out "$dir/r"
expect 1 "/dev/zero: not a regular file (a character device)" -- "$train" --data /dev/zero --out "$dir/r"
mkdir "$dir/adir"
expect 1 "$dir/adir: not a regular file (a directory)" -- "$train" --data "$dir/adir" --out "$dir/r"
head -c 10000000 /dev/zero | tr '\0' 'x' > "$dir/one_line.tsv"
expect 1 "$dir/one_line.tsv:1: line of 10000000 bytes exceeds the maximum of 4096" -- \
  "$train" --data "$dir/one_line.tsv" --strict --out "$dir/r"
{ for i in $(seq 1 30); do printf 'ab%d\tba%d\n' "$i" "$i"; done; echo; printf '%0200d\tx\n' 0; } > "$dir/long.tsv"
expect 1 "$dir/long.tsv:32: 200 source and 1 target tokens; --max-len 128 allows 128 and 127" -- \
  "$train" --data "$dir/long.tsv" --level char --strict --out "$dir/r"
expect 0 "$dir/long.tsv: 1 training pairs longer than --max-len 128 skipped; 27 kept" -- \
  "$train" --data "$dir/long.tsv" --level char --out "$dir/r" --steps 1 --d-model 8 --heads 1 --d-ff 8
tail -n 1 "$dir/long.tsv" > "$dir/long_test.tsv"
expect 1 "$dir/long_test.tsv: none of its 1 test pairs fits --max-len 128" -- \
  "$train" --data "$dir/long.tsv" --level char --test "$dir/long_test.tsv" --out "$dir/r2"

# --- what train may write over ----------------------------------------------------------------
mkdir -p "$dir/user"
for i in $(seq 1 40); do printf 'in%d\tout%d\n' "$i" "$i"; done > "$dir/user/train.tsv"
cp "$dir/user/train.tsv" "$dir/corpus.tsv"
expect 1 "$dir/user/train.tsv: lies inside --out $dir/user" -- "$train" --data "$dir/user/train.tsv" --out "$dir/user"
expect 1 "$dir/user/train.tsv: exists and was not written by train" -- "$train" --data "$dir/corpus.tsv" --out "$dir/user"
cmp "$dir/user/train.tsv" "$dir/corpus.tsv" || fail "the user's train.tsv changed"
printf 'mine\tnote\r\n' > "$dir/user/test.tsv"
cp "$dir/user/test.tsv" "$dir/user_test.tsv"
head -n 5 "$dir/corpus.tsv" > "$dir/user/valid.tsv"
expect 1 "$dir/user/test.tsv: lies inside --out $dir/user" -- \
  "$train" --data "$dir/corpus.tsv" --test "$dir/user/test.tsv" --out "$dir/user"
expect 1 "$dir/user/valid.tsv: lies inside --out $dir/user" -- \
  "$train" --data "$dir/corpus.tsv" --valid "$dir/user/valid.tsv" --out "$dir/user"
cmp "$dir/user/test.tsv" "$dir/user_test.tsv" || fail "the user's test.tsv changed"
# every name a run of either kind holds, in a user's folder that is not a run, is refused
for i in $(seq 1 300); do echo "the cat sat on the mat $((i % 10))."; done > "$dir/text.txt"
tiny=(--d-model 16 --heads 2 --d-ff 32 --decoder-layers 1 --steps 4 --warmup 1 --save-every 2
      --eval-every 2)
"$train" "${tiny[@]}" --data "$dir/corpus.tsv" --test "$dir/corpus.tsv" --level char \
  --out "$dir/named" > /dev/null 2>&1 || fail "the run with a test set"
"$train" "${tiny[@]}" --task lm --data "$dir/text.txt" --block-size 8 --batch 4 --eval-batches 1 \
  --out "$dir/named_lm" > /dev/null 2>&1 || fail "the language model's run"
for path in "$dir"/named/* "$dir"/named_lm/*; do
  name=${path##*/}
  rm -rf "$dir/own"; mkdir "$dir/own"; printf 'mine\r\n' > "$dir/own/$name"
  expect 1 "$dir/own/$name: exists and was not written by train" -- \
    "$train" "${args[@]}" --out "$dir/own"
  [[ $(cat "$dir/own/$name") == $'mine\r' ]] || fail "$name: the user's file changed"
done
[[ -e "$dir/named/test.tsv" && -e "$dir/named_lm/samples.tsv" ]] || fail "the runs lack a name"
: > "$dir/afile"
expect 1 "$dir/afile: not a directory" -- "$train" "${args[@]}" --out "$dir/afile"

# --- a good run to damage -----------------------------------------------------------------------
"$train" "${args[@]}" --out "$dir/good" > /dev/null 2>&1 || { echo "FAILED: the good run"; exit 1; }
[[ $(cat "$dir/good/latest") == step-00000008 ]] || { echo "FAILED: latest is $(cat "$dir/good/latest")"; exit 1; }
fresh() {  # a copy of the good run to damage, ready for --resume
  rm -rf "$dir/bad"
  cp -r "$dir/good" "$dir/bad"
  ckpt="$dir/bad/checkpoints/step-00000008"
}
resume=("$train" --out "$dir/bad" --resume --steps 12 --reschedule)

fresh; echo "not a step" > "$dir/bad/latest"
expect 1 "$dir/bad/latest: expected a name like step-00000300, got 'not a step'" -- "$translate" --run "$dir/bad" abc
fresh; echo "step-00000099" > "$dir/bad/latest"
expect 1 "$dir/bad/latest: names $dir/bad/checkpoints/step-00000099, which is missing" -- "${resume[@]}"
fresh; rm "$dir/bad/latest"; mkfifo "$dir/bad/latest"
expect 1 "$dir/bad/latest: not a regular file (a fifo)" -- "$translate" --run "$dir/bad" abc
fresh; rm "$dir/bad/latest"
expect 1 "$dir/bad: no complete checkpoint" -- "${resume[@]}"
fresh; rm "$ckpt/src.vocab"; mkfifo "$ckpt/src.vocab"
expect 1 "$ckpt/src.vocab: not a regular file (a fifo)" -- "$translate" --run "$dir/bad" abc
fresh; { echo "tapegrad-vocab char"; printf '<pad>\n<bos>\n<eos>\n<unk>\n'; printf '%02000d\n' 0; } > "$ckpt/tgt.vocab"
expect 1 "$ckpt/tgt.vocab:6: token of 2000 bytes is over the limit of 1024" -- "$translate" --run "$dir/bad" abc

# safetensors headers, rewritten with their length prefix
header() { head -c "$((8 + $(od -An -tu8 -N8 "$1")))" "$1" | tail -c +9; }
put_header() {  # put_header FILE NEW_HEADER: keeps the data, pads the header to 8 bytes
  local data h="$2"
  data=$(mktemp)
  tail -c +"$((9 + $(od -An -tu8 -N8 "$1")))" "$1" > "$data"
  while (( ${#h} % 8 )); do h+=" "; done
  local n=${#h} i le=""
  for i in 0 1 2 3 4 5 6 7; do le+=$(printf '\\x%02x' $(((n >> (8 * i)) & 255))); done
  { printf "$le"; printf '%s' "$h"; cat "$data"; } > "$1"
  rm "$data"
}
# the config: config.json, and the copy in the weights' metadata
fresh; sed -i 's/"heads":2/"heads":2.5/' "$ckpt/config.json"
expect 1 "$ckpt/config.json: 'heads' must be an integer, got 2.5" -- "$translate" --run "$dir/bad" abc
fresh; sed -i 's/"d_model":16/"d_model":1000000000/' "$ckpt/config.json"
expect 1 "d_model = 1000000000 is outside [1, 16384]" -- "$translate" --run "$dir/bad" abc
fresh; put_header "$ckpt/model.safetensors" "$(header "$ckpt/model.safetensors" | sed 's/"heads\\":2/"heads\\":2.5/')"
expect 1 "$ckpt/model.safetensors: metadata 'config': 'heads' must be an integer, got 2.5" -- "$translate" --run "$dir/bad" abc
fresh; put_header "$ckpt/model.safetensors" "$(header "$ckpt/model.safetensors" | sed 's/"d_ff\\":32/"d_ff\\":64/')"
expect 1 "$ckpt/model.safetensors: its metadata 'config' differs from config.json" -- "$translate" --run "$dir/bad" abc
# without config.json (a tapegrad 0.1 checkpoint) the metadata's config is the config
fresh; rm "$ckpt/config.json"
put_header "$ckpt/model.safetensors" "$(header "$ckpt/model.safetensors" | sed 's/"d_ff\\":32/"d_ff\\":64/')"
expect 1 "its config describes a model of" -- "$translate" --run "$dir/bad" abc
fresh; put_header "$ckpt/model.safetensors" "{\"w\":$(printf '[%.0s' $(seq 1 100000))$(printf ']%.0s' $(seq 1 100000))}"
expect 1 "$ckpt/model.safetensors: header nests deeper than 128 levels" -- "$translate" --run "$dir/bad" abc

# inconsistent or damaged trainer state
fresh; sed -i 's/"epoch_index": [0-9]*/"epoch_index": 999999/' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: 'epoch_index' 999999 at step 8 is not a batch from 1 to the 4 of an epoch" -- "${resume[@]}"
fresh; sed -i 's/"epoch_index": [0-9]*/"epoch_index": 0/' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: 'epoch_index' 0 at step 8 is not a batch from 1" -- "${resume[@]}"
fresh; sed -i 's/"epoch_index": [0-9]*/"epoch_index": -3/' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: 'epoch_index' must be a non-negative integer" -- "${resume[@]}"
fresh; sed -i 's/"data": "[0-9 ]*"/"data": "1 2"/' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: generator 'data': expected four unsigned integers" -- "${resume[@]}"
fresh; sed -i 's/"data": "\([0-9]*\) /"data": "-\1 /' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: generator 'data': expected four unsigned integers" -- "${resume[@]}"
fresh; sed -i 's/"data": "\([0-9]*\) /"data": "\1  /' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: generator 'data': expected four unsigned integers" -- "${resume[@]}"
fresh; sed -i '/^  "data": "[0-9]* /d' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: no state for generator 'data'" -- "${resume[@]}"
fresh; sed -i '/"decoder.layers.0.dropout1.": /d' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: no state for generator 'decoder.layers.0.dropout1.'" -- "${resume[@]}"
# the logs' lengths against the logs: loss.tsv has a line a step, eval.tsv one a validation
log_bytes() { sed -i "s/\"$1\": [0-9]*/\"$1\": $2/" "$ckpt/trainer.json"; }
fresh; log_bytes loss_log_bytes 0
expect 1 "$dir/bad/loss.tsv: $ckpt/trainer.json's 'loss_log_bytes' 0 ends the log at step 0, not at the checkpoint's step 8" -- "${resume[@]}"
cmp -s "$dir/bad/loss.tsv" "$dir/good/loss.tsv" || fail "a refused resume changed loss.tsv"
fresh; log_bytes loss_log_bytes "$(head -n 4 "$dir/good/loss.tsv" | wc -c)"
expect 1 "'loss_log_bytes' $(head -n 4 "$dir/good/loss.tsv" | wc -c) ends the log at step 4, not at the checkpoint's step 8" -- "${resume[@]}"
fresh; log_bytes loss_log_bytes "$(($(wc -c < "$dir/good/loss.tsv") - 1))"
expect 1 "$dir/bad/loss.tsv: $ckpt/trainer.json's 'loss_log_bytes' $(($(wc -c < "$dir/good/loss.tsv") - 1)) ends inside a line" -- "${resume[@]}"
fresh; log_bytes eval_log_bytes 0
expect 1 "$dir/bad/eval.tsv: $ckpt/trainer.json's 'eval_log_bytes' 0 leaves out the line of step 8, up to the checkpoint's step 8" -- "${resume[@]}"
fresh; cp "$dir/bad/checkpoints/step-00000004/trainer.json" "$ckpt/trainer.json"
sed -i 's/^ "step": 4/ "step": 8/' "$ckpt/trainer.json"
expect 1 "$dir/bad/loss.tsv: $ckpt/trainer.json's 'loss_log_bytes'" -- "${resume[@]}"
fresh; sed -i 's/"batch": "64"/"batch": "sixty"/' "$ckpt/trainer.json"
expect 2 "--batch (saved in $ckpt/trainer.json): expected an integer, got 'sixty'" -- "${resume[@]}"
fresh; sed -i 's/"lr": "0.002"/"lr": "fast"/' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: flag 'lr' is 'fast', not a number" -- "${resume[@]}" --lr 0.001
fresh; sed -i "s/\"step\": 8/\"step\": $(printf '[%.0s' $(seq 1 200))$(printf ']%.0s' $(seq 1 200))/" "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: nests deeper than 128 levels" -- "${resume[@]}"
fresh; sed -i 's/"since": 0/"since": -1/' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: 'best.since' must be a non-negative integer" -- "$translate" --run "$dir/bad" abc
fresh; sed -i 's/"value": [-0-9.e]*/"value": "high"/' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: 'best.value' must be a finite number" -- "${resume[@]}"
fresh; sed -i 's/^  "step": 8,/  "step": 9,/' "$ckpt/trainer.json"  # best's step, past the checkpoint's
expect 1 "$ckpt/trainer.json: 'best.step' 9 is not a step from 1 to 'step' 8" -- "$translate" --run "$dir/bad" abc
fresh; sed -i 's/"since": 0/"since": 1/' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: 'best.since' 1 disagrees with $dir/bad/eval.tsv: 0 validations after step 8" -- "${resume[@]}"
fresh; sed -i 's/^  "step": 8,/  "step": 4,/' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: 'best.step' 4 is not a step $dir/bad/eval.tsv validated at" -- "${resume[@]}"
fresh; sed -i 's/^  "step": 8,/  "step": 4,/' "$ckpt/trainer.json"; rm -r "$dir/bad/checkpoints/step-00000004"
expect 1 "$ckpt/trainer.json: names step 4 the best, whose $dir/bad/checkpoints/step-00000004 is missing" -- \
  "$translate" --run "$dir/bad" abc
fresh; cp "$dir/bad/checkpoints/step-00000004/model.safetensors" "$ckpt/model.safetensors"
expect 1 "$ckpt: trainer.json is at step 8, model.safetensors at 4" -- "${resume[@]}"
fresh; rm -r "$ckpt"; mv "$dir/bad/checkpoints/step-00000004" "$ckpt"
expect 1 "$ckpt: holds the checkpoint of step 4: it was renamed" -- "${resume[@]}"
fresh; cp "$dir/bad/checkpoints/step-00000004/optimizer.safetensors" "$ckpt/optimizer.safetensors"
expect 1 "$ckpt/optimizer.safetensors: is at step 4, trainer.json at 8" -- "${resume[@]}"
fresh; printf '\x00\x00\xc0\x7f' | dd of="$ckpt/optimizer.safetensors" bs=1 seek=$(($(stat -c %s "$ckpt/optimizer.safetensors") - 4)) conv=notrunc 2> /dev/null
expect 1 "holds NaN or Inf" -- "${resume[@]}"
fresh; printf '\x00\x00\xc0\x7f' | dd of="$ckpt/model.safetensors" bs=1 seek=$(($(stat -c %s "$ckpt/model.safetensors") - 4)) conv=notrunc 2> /dev/null
expect 1 "$ckpt/model.safetensors: does not fit MiniTransformer: '" -- "$translate" --run "$dir/bad" abc
expect 1 "' holds NaN or an infinity" -- "${resume[@]}"
# a model whose weights are finite but huge: the loss overflows, named with its step and the
# checkpoint the resume began at
fresh; start=$((8 + $(od -An -tu8 -N8 "$ckpt/model.safetensors")))
head -c $(($(stat -c %s "$ckpt/model.safetensors") - start)) /dev/zero | tr '\0' '\177' |
  dd of="$ckpt/model.safetensors" bs=4096 seek="$start" oflag=seek_bytes conv=notrunc 2> /dev/null
expect 1 "step 9 (resumed from $ckpt): the loss is" -- "${resume[@]}"
fresh; sed -i '2s/\t[0-9]/\tx/' "$dir/bad/loss.tsv"  # the same length: not a truncation
expect 1 "$dir/bad/loss.tsv:2: expected step, loss and learning rate, tab-separated" -- "${resume[@]}"
fresh; sed -i '1s/\t[0-9]/\tx/' "$dir/bad/eval.tsv"
expect 1 "$dir/bad/eval.tsv:1: expected step, loss, token accuracy and exact match" -- "${resume[@]}"
fresh; sed -i '3s/^[0-9]/x/' "$dir/bad/loss.tsv"
expect 1 "$dir/bad/loss.tsv:3: expected a line that begins with its step" -- "${resume[@]}"
fresh; head -c 100 "$dir/good/loss.tsv" > "$dir/bad/loss.tsv"
expect 1 "$dir/bad/loss.tsv: shorter than the" -- "${resume[@]}"

# streams that never end or are not text: stopped at once, naming the line
expect_stdin() {  # expect_stdin MESSAGE COMMAND_FOR_STDIN
  local out got
  timeout 20 bash -c "$2" 2> /dev/null | timeout 20 "$translate" --run "$dir/good" > /dev/null 2> "$dir/err"
  got=${PIPESTATUS[1]}
  out=$(cat "$dir/err")
  [[ $got == 1 && $out == *"$1"* ]] || fail "stdin from '$2': exit $got: ${out:0:300}"
}
expect_stdin "stdin:1: a NUL byte at byte 1 of the line: binary input" "cat /dev/zero"
expect_stdin "stdin:1: a line longer than 65536 bytes; stopping" "yes | tr -d '\n'"
expect_stdin "stdin:3: a NUL byte at byte 2" "printf 'abc\ndef\nx\0y\n'"
# flags: unknown ones list the flags; ones without effect are refused; a default that does not
# fit the run adapts and says so
expect 2 "--bogus: unknown flag; the flags are --run --checkpoint --beam" -- "$translate" --run "$dir/good" --bogus 1 abc
expect 2 "--temperature has no effect without --sample" -- "$translate" --run "$dir/good" --temperature 0.5 abc
expect 2 "--top-p has no effect without --sample" -- "$translate" --run "$dir/good" --top-p 0.5 abc
expect 2 "--length-penalty has no effect without --beam" -- "$translate" --run "$dir/good" --length-penalty 1 abc
expect 2 "--sample: takes no value" -- "$translate" --run "$dir/good" --sample=no abc
expect 2 "unexpected argument 'stray': this program takes flags only" -- "$train" "${args[@]}" stray
expect 1 "$dir/nowhere: no such folder, so no run to read" -- "$translate" --run "$dir/nowhere" abc
expect 2 "--vocab-size goes with --level bpe or unigram" -- "$classify" --data "$dir/corpus.tsv" --level char --vocab-size 50
expect 2 "--lr: must be positive, got 0" -- "$classify" --lr 0
expect 2 "--lr: must be positive, got 0" -- "$train" "${args[@]}" --lr 0 --out "$dir/r"
expect 2 "--strict has no effect without --data" -- "$train" "${args[@]}" --strict --out "$dir/r"
expect 2 "--train-size sizes a generated task" -- "$train" --data "$dir/corpus.tsv" --train-size 9 --out "$dir/r"
expect 2 "--warmup has no effect with --schedule constant" -- "$train" "${args[@]}" --schedule constant --out "$dir/r"
expect 2 "--warmup 8 must be below --steps 8" -- "$train" "${args[@]}" --warmup 8 --out "$dir/r"
expect 0 "--warmup: the default 200 is not below --steps 8; using 0" -- "$train" --task copy --train-size 50 \
  --valid-size 5 --d-model 16 --heads 2 --d-ff 32 --steps 8 --out "$dir/warm"

# what a run folder records is checked against itself, and every value read from a file is
# named as coming from that file
fresh; sed -i 's/"d-ff": "32"/"d-ff": "64"/' "$ckpt/trainer.json"
expect 1 "$ckpt: disagrees with its trainer.json's flags: --d-ff 64, but config.json's d_ff 32" -- "${resume[@]}"
fresh; sed -i 's/"level": "char"/"level": "word"/' "$ckpt/trainer.json"
expect 1 "--level word, but src.vocab is char; --level word, but tgt.vocab is char" -- "${resume[@]}"
fresh; sed -i 's/"lowercase": "false"/"lowercase": "true"/' "$ckpt/trainer.json"
expect 1 "$ckpt: disagrees with its trainer.json's flags: --lowercase true, but src.vocab's lowercase is false" -- "${resume[@]}"
fresh; sed -i 's/"shared-vocab": "false"/"shared-vocab": "true"/' "$ckpt/trainer.json"
expect 0 "" -- "${resume[@]}"  # copy's two vocabularies are the same characters
fresh; sed -i 's/"epoch_index": /"stpe": 8, "epoch_index": /' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: unknown key 'stpe'" -- "${resume[@]}"
fresh; sed -i 's/"flags": {/"flags": {"bogus": "1", /' "$ckpt/trainer.json"
expect 2 "--bogus (saved in $ckpt/trainer.json): unknown flag" -- "${resume[@]}"
fresh; sed -i 's/"flags": {/"flags": {"out": "\/etc", /' "$ckpt/trainer.json"
expect 2 "$ckpt/trainer.json saves --out, which is not a flag a run keeps" -- "${resume[@]}"
fresh; sed -i 's/"data": "[0-9][0-9 ]*"/&, "decoder.layers.9.dropout": "1 2 3 4"/' "$ckpt/trainer.json"
expect 1 "a state for generator 'decoder.layers.9.dropout', which the model does not have" -- "${resume[@]}"
fresh; sed -i 's/"lr": "0.002"/"lr": "0"/' "$ckpt/trainer.json"
expect 2 "--lr (saved in $ckpt/trainer.json): must be positive, got 0" -- "${resume[@]}"
fresh; sed -i 's/"heads": "2"/"heads": "3"/' "$ckpt/trainer.json"
expect 2 "--d-model (saved in $ckpt/trainer.json) 16 is not divisible by --heads (saved in $ckpt/trainer.json) 3" -- "${resume[@]}"
fresh; sed -i 's/"warmup": "2"/"warmup": "20"/' "$ckpt/trainer.json"
expect 2 "--warmup (saved in $ckpt/trainer.json) 20 must be below --steps 12" -- "${resume[@]}"
fresh; sed -i 's/"schedule": "cosine"/"schedule": "cosnie"/' "$ckpt/trainer.json"
expect 1 "$ckpt/trainer.json: its flags --schedule, --lr, --warmup and --steps make no schedule: unknown schedule 'cosnie'" -- \
  "${resume[@]}" --schedule cosine
fresh; sed -i 's/"d_ff":32/"d_ff":32,"d_fff":1/' "$ckpt/config.json"
expect 1 "$ckpt/config.json: unknown key 'd_fff'" -- "$translate" --run "$dir/bad" abc
fresh; : > "$ckpt/config.json"
expect 1 "$ckpt/config.json: is empty" -- "$translate" --run "$dir/bad" abc
fresh; sed -i '1s/^/x/' "$dir/bad/train.tsv"
expect 1 "$dir/bad: train.tsv or valid.tsv is not the split $ckpt/trainer.json was trained on" -- "${resume[@]}"
fresh; rm -rf "$dir/other"; "$train" "${args[@]}" --seed 2 --out "$dir/other" > /dev/null 2>&1
rm -rf "$ckpt"; cp -r "$dir/other/checkpoints/step-00000008" "$ckpt"
expect 1 "is not the split $ckpt/trainer.json was trained on" -- "${resume[@]}"

# flags that conflict with the run, or a finished run
fresh
expect 2 "--batch: the run has 64, got 128" -- "$train" --out "$dir/bad" --resume --steps 12 --batch 128 --d-model 32
expect 2 "--d-model: the run has 16, got 32" -- "$train" --out "$dir/bad" --resume --steps 12 --batch 128 --d-model 32
expect 2 "the run in $dir/bad finished at step 8 of 8" -- "$train" --out "$dir/bad" --resume
expect 2 "--steps 6: the run in $dir/bad is already at step 8" -- "$train" --out "$dir/bad" --resume --steps 6
expect 2 "the learning rate was 2e-05 at step 8; the new schedule (cosine over 12 steps) gives" -- \
  "$train" --out "$dir/bad" --resume --steps 12

# what a killed process left is cleaned up; a second writer is refused
fresh
: > "$dir/bad/.loss.svg.tmp.99999"
mkdir "$dir/bad/checkpoints/.step-00000012.tmp.99999" "$dir/bad/checkpoints/step-00000999"
"$train" --out "$dir/bad" --resume --steps 12 --reschedule > /dev/null 2>&1 || fail "resume after a crash"
left=$(find "$dir/bad" -name '*.tmp.*' -o -name step-00000999 | wc -l)
[[ $left == 0 ]] || fail "$left leftovers of a killed process remain"
ls "$dir/bad/checkpoints" | tr '\n' ' ' | grep -qx "step-00000008 step-00000012 " ||
  fail "checkpoints kept: $(ls "$dir/bad/checkpoints")"
"$train" "${args[@]}" --steps 100000 --save-every 0 --out "$dir/busy" > /dev/null 2>&1 &
busy=$!
for _ in $(seq 1 100); do [[ -f $dir/busy/loss.tsv ]] && break; sleep 0.05; done
expect 1 "$dir/busy: another train process is writing this run" -- "$train" "${args[@]}" --out "$dir/busy" --replace
kill -TERM "$busy"
wait "$busy"
code=$?
[[ $code == 143 && $(cat "$dir/busy/latest" 2> /dev/null) == step-* ]] ||
  fail "SIGTERM: exit $code, latest '$(cat "$dir/busy/latest" 2> /dev/null)'"

((fails == 0)) || { echo "$fails hostile cases failed"; exit 1; }
echo "hostile files and flags: every case an error naming its file or flag"
