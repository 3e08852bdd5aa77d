#!/usr/bin/env bash
# A user's files are never lost: a run folder that exists is not overwritten by a new run
# (the default folder is numbered past it, an explicit --out is refused), --replace keeps the
# old run whole until the new one has committed its first checkpoint (a replace killed before
# that leaves the old run as it was), and no file is written through a link, a hard link or
# a special file at one of train's names; tour --draw never replaces a user's file either.
#   run_folder.sh TRAIN TRANSLATE CLASSIFY TOUR
set -uo pipefail
train=$1
translate=$2
tour=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/expect.sh"
cd "$dir"
args=(--task copy --train-size 200 --valid-size 20 --eval-every 100000 --d-model 16 --heads 2
      --d-ff 32 --seed 1 --warmup 2 --steps 8 --save-every 4)
snapshot() { (cd "$1" && find . -type f ! -name .lock -exec sha256sum {} + | sort); }

# --- the same command twice: the second run goes next to the first ------------------------------
"$train" "${args[@]}" > /dev/null 2>&1 || fail "the first run"
before=$(snapshot runs/copy)
expect 0 "runs/copy exists, so this run goes to runs/copy-2" -- "$train" "${args[@]}"
[[ $(snapshot runs/copy) == "$before" ]] || fail "the second run changed runs/copy"
[[ $(cat runs/copy-2/latest) == step-00000008 ]] || fail "runs/copy-2 has no run"
expect 1 "runs/copy: holds a run at step 8: --resume continues it, --replace" -- \
  "$train" "${args[@]}" --out runs/copy
[[ $(snapshot runs/copy) == "$before" ]] || fail "a refused run changed runs/copy"
expect 2 "--replace and --resume exclude each other" -- "$train" --out runs/copy --resume --replace

# --- --replace: the old run stays whole until the new one's first checkpoint -----------------
"$train" "${args[@]}" --out runs/copy --replace --steps 100000 --save-every 0 > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1 200); do compgen -G "runs/.copy.replace.*/loss.tsv" > /dev/null && break; sleep 0.05; done
compgen -G "runs/.copy.replace.*/loss.tsv" > /dev/null || fail "--replace built no staging folder"
[[ $(snapshot runs/copy) == "$before" ]] || fail "--replace changed the old run before its checkpoint"
expect 0 "" -- "$translate" --run runs/copy "a b c"
kill -9 "$pid"
wait "$pid" 2> /dev/null
[[ $(snapshot runs/copy) == "$before" ]] || fail "a replace killed before its checkpoint changed the old run"
"$train" "${args[@]}" --out runs/copy --replace --steps 12 > /dev/null 2>&1 || fail "--replace"
[[ $(cat runs/copy/latest) == step-00000012 ]] || fail "--replace: latest is $(cat runs/copy/latest)"
[[ $(grep -c . runs/copy/loss.tsv) == 12 ]] || fail "--replace: the new loss.tsv is not 12 lines"
left=$(compgen -G "runs/.copy.replace.*" | wc -l)
[[ $left == 0 ]] || fail "$left staging folders remain after --replace"

# --- nothing is written through a link or into a special file ---------------------------------
fresh() {  # fresh NAME: a copy of runs/copy-2 to resume
  rm -rf "runs/$1"
  cp -r runs/copy-2 "runs/$1"
}
resume() { echo "$train" --out "runs/$1" --resume --steps 12 --reschedule; }
echo step-00000008 > precious  # a valid `latest`, so the link is what is refused
for name in loss.tsv eval.tsv latest report.html loss.svg train.tsv; do
  fresh link; rm -f "runs/link/$name"; ln -s "$dir/precious" "runs/link/$name"
  expect 1 "runs/link/$name: is a symbolic link; refusing to write through it" -- $(resume link)
  fresh hard; rm -f "runs/hard/$name"; ln precious "runs/hard/$name"
  expect 1 "runs/hard/$name: has 2 names (a hard link); refusing" -- $(resume hard)
  [[ $(cat precious) == step-00000008 ]] || fail "$name: the linked file changed"
done
fresh fifo; rm runs/fifo/loss.tsv; mkfifo runs/fifo/loss.tsv
expect 1 "runs/fifo/loss.tsv: is a fifo, not a regular file" -- $(resume fifo)
fresh dangling; rm runs/dangling/loss.svg; ln -s "$dir/nothing" runs/dangling/loss.svg
expect 1 "runs/dangling/loss.svg: is a symbolic link" -- $(resume dangling)
[[ ! -e nothing ]] || fail "a dangling link was written through"
fresh ckpt; mv runs/ckpt/checkpoints elsewhere; ln -s "$dir/elsewhere" runs/ckpt/checkpoints
expect 1 "runs/ckpt/checkpoints: is not the folder train makes" -- $(resume ckpt)
fresh mark; rm runs/mark/.tapegrad-run; ln -s "$dir/precious" runs/mark/.tapegrad-run
expect 1 "runs/mark/.tapegrad-run: is not the file train writes" -- $(resume mark)

# --- the other programs' output folders: a user's file of the same name is never replaced ------
mkdir drawings
echo mine > drawings/tape.svg
expect 1 "drawings/tape.svg: exists and was not written by this program" -- "$tour" --draw drawings
[[ $(cat drawings/tape.svg) == mine ]] || fail "tour --draw replaced the user's tape.svg"
expect 0 "" -- "$tour" --draw fresh_drawings
expect 0 "" -- "$tour" --draw fresh_drawings  # its own files, drawn again

((fails == 0)) || { echo "$fails run-folder cases failed"; exit 1; }
echo "run folders: nothing overwritten, nothing written through a link or special file"
