#!/usr/bin/env bash
# Faults at the system-call level (tests/fault/fault_shim.cpp): a run at step 4 is resumed to
# step 8, and the N-th call that changes its folder (an open to write, a write, fsync, close,
# rename, mkdir, unlink) fails with EIO, or the process is killed just before it, for every
# step of the commit of checkpoint 8, of the `latest` update and of the report. After each
# fault: a failure is an error naming a file (exit 1, never a crash; a step whose failure
# changes nothing, such as removing a temporary that is not there, may pass), `latest` names a
# complete checkpoint that translate loads, and resuming ends bit-identical to a run that had
# no fault. Then the same for --replace, killed at each step that is not a write: the folder
# holds the old run, whole, or the new one with a complete checkpoint.
#   commit_faults.sh TRAIN TRANSLATE SHIM
set -uo pipefail
train=$1
translate=$2
shim=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/expect.sh"
args=(--task copy --train-size 200 --valid-size 20 --eval-every 100000 --d-model 16 --heads 2
      --d-ff 32 --seed 1 --warmup 2 --steps 8 --save-every 4)
"$train" "${args[@]}" --out "$dir/straight" > /dev/null 2>&1 || { echo "the straight run failed"; exit 1; }
"$train" "${args[@]}" --stop-after 4 --out "$dir/base" > /dev/null 2>&1 || { echo "the base run failed"; exit 1; }
snapshot() { (cd "$1" && find . -type f ! -name .lock -exec sha256sum {} + | sort); }
base=$(snapshot "$dir/base")
final=(checkpoints/step-00000008/model.safetensors checkpoints/step-00000008/optimizer.safetensors
       loss.tsv eval.tsv)

# under_shim LOG AT MODE COMMAND...: runs COMMAND with the shim counting in $fault_dir
fault_dir=$dir/run
under_shim() {
  local log=$1 at=$2 mode=$3
  shift 3
  TAPEGRAD_FAULT_DIR="$fault_dir" TAPEGRAD_FAULT_LOG="$log" TAPEGRAD_FAULT_AT="$at" \
    TAPEGRAD_FAULT_MODE="$mode" LD_PRELOAD="$shim" timeout 60 "$@" > /dev/null 2> "$dir/err" &
  wait $! 2> /dev/null  # bash reports a killed job of its own; one waited for in the background it does not
}
# The steps to fault in a log: every one but a write, and the first write of each file.
chosen() { awk '$2 != "write" || prev != "write" { print $1 } { prev = $2 }' "$1"; }

# the run in $dir/run is consistent: latest names a whole checkpoint, and resuming it ends
# bit-identical to the straight run
check_run() {
  local what=$1 latest ckpt f
  latest=$(cat "$dir/run/latest" 2> /dev/null)
  ckpt="$dir/run/checkpoints/$latest"
  for f in config.json model.safetensors src.vocab tgt.vocab optimizer.safetensors trainer.json; do
    [[ -f $ckpt/$f ]] || { fail "$what: latest '$latest' lacks $f"; return; }
  done
  "$translate" --run "$dir/run" --checkpoint latest "a b" > /dev/null 2>&1 || {
    fail "$what: translate cannot load '$latest'"; return; }
  "$translate" --run "$dir/run" "a b" > /dev/null 2>&1 || {
    fail "$what: translate cannot load the best, '$(cat "$dir/run/best" 2> /dev/null)'"; return; }
  if [[ $latest != step-00000008 ]]; then
    "$train" --out "$dir/run" --resume > /dev/null 2> "$dir/err2" || {
      fail "$what: the resume failed: $(cat "$dir/err2")"; return; }
  fi
  for f in "${final[@]}"; do
    cmp -s "$dir/straight/$f" "$dir/run/$f" || { fail "$what: $f differs from the straight run"; return; }
  done
  [[ -z $(compgen -G "$dir/.run.replace.*") ]] || fail "$what: a staging folder was left after the resume"
}

# --- resume from step 4 to step 8 ---------------------------------------------------------------
cp -a "$dir/base" "$dir/run"
under_shim "$dir/steps" 0 count "$train" --out "$dir/run" --resume || { echo "the counting run failed"; exit 1; }
grep -q "rename $dir/run/latest" "$dir/steps" || { echo "the shim saw no update of latest"; exit 1; }
cases=0
for mode in fail kill; do
  for n in $(chosen "$dir/steps"); do
    rm -rf "$dir/run"
    cp -a "$dir/base" "$dir/run"
    under_shim /dev/null "$n" "$mode" "$train" --out "$dir/run" --resume
    code=$?
    what="$mode at step $n ($(sed -n "${n}p" "$dir/steps"))"
    if [[ $mode == kill && $code != 137 ]]; then
      fail "$what: exit $code, not a kill"
    elif [[ $mode == fail && $code != 0 && ($code != 1 || $(tail -1 "$dir/err") != "train: $dir/run"*) ]]; then
      fail "$what: exit $code: $(tail -1 "$dir/err" | head -c 300)"
    fi
    check_run "$what"
    cases=$((cases + 1))
  done
done

# --- --replace over the run at step 4, killed at each step but a write --------------------------
# (the staging folder is a sibling of run/: the shim counts in all of $dir)
fault_dir=$dir
rm -rf "$dir/run"
cp -a "$dir/base" "$dir/run"
under_shim "$dir/replace_steps" 0 count "$train" "${args[@]}" --out "$dir/run" --replace ||
  { echo "the counting --replace failed"; exit 1; }
exchange=$(awk '$2 == "renameat2" { print $1; exit }' "$dir/replace_steps")
[[ -n $exchange ]] || { echo "the shim saw no exchange"; exit 1; }
for n in $(awk '$2 != "write" { print $1 }' "$dir/replace_steps"); do
  rm -rf "$dir/run" "$dir"/.run.replace.*
  cp -a "$dir/base" "$dir/run"
  under_shim /dev/null "$n" kill "$train" "${args[@]}" --out "$dir/run" --replace
  what="--replace killed at step $n ($(sed -n "${n}p" "$dir/replace_steps"))"
  if ((n <= exchange)) && [[ $(snapshot "$dir/run") != "$base" ]]; then
    fail "$what: the old run changed before the exchange"
  fi
  check_run "$what"
  cases=$((cases + 1))
done

((fails == 0)) || { echo "$fails of $cases faults left an inconsistent run"; exit 1; }
echo "commit faults: $cases faults (fail and kill at each step), each run consistent and resumed exactly"
