#!/usr/bin/env bash
# train checks its flags and its data before the first step, naming the flag or file and line.
set -uo pipefail
train=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
expect() {  # expect EXIT_CODE MESSAGE -- ARGS...
  local code=$1 message=$2
  shift 3
  local out
  out=$("$train" "$@" --out "$dir/run" 2>&1)
  local got=$?
  if [[ $got != "$code" || $out != *"$message"* ]]; then
    echo "train $*: expected exit $code and '$message', got exit $got: $out"
    exit 1
  fi
}
expect 2 "--steps: expected an integer, got 'many'" -- --steps many
expect 2 "--lr: must be in [0, 10], got -1" -- --lr -1
expect 2 "--task: unknown task 'poems'" -- --task poems
expect 2 "--bogus: unknown flag (see --help)" -- --bogus 1
expect 2 "--d-model 30 is not divisible by --heads 4" -- --d-model 30
printf 'a\tb\nno tab\n' > "$dir/bad.tsv"
expect 1 "$dir/bad.tsv:2: no tab between source and target" -- --data "$dir/bad.tsv" --strict
: > "$dir/empty.tsv"
expect 1 "$dir/empty.tsv: no valid examples (0 lines, 0 malformed)" -- --data "$dir/empty.tsv"
printf 'ok\tfine\n' > "$dir/tiny.tsv"
expect 1 "too few examples (1) to hold any out" -- --data "$dir/tiny.tsv"
expect 1 "generated training example 1 ('2038-11-05'): 10 source and 10 target tokens; --max-len 8 allows 8 and 7" -- --task dates --max-len 8 --train-size 50 --valid-size 5
echo "train flag and data errors: ok"
