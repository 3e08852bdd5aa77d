#!/usr/bin/env bash
# train checks its flags and its data before the first step, naming the flag or file and line;
# translate, classify and tour check theirs, and every program answers --help.
#   train_errors.sh TRAIN TRANSLATE CLASSIFY TOUR
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
expect 2 "--precision: fp32 or bf16, got 'fp16'" -- --precision fp16
expect 2 "--bogus: unknown flag; the flags are --config --resume --replace --out" -- --bogus 1
expect 2 "--d-model 30 is not divisible by --heads 4" -- --d-model 30
printf 'a\tb\nno tab\n' > "$dir/bad.tsv"
expect 1 "$dir/bad.tsv:2: no tab between source and target" -- --data "$dir/bad.tsv" --strict
: > "$dir/empty.tsv"
expect 1 "$dir/empty.tsv: no valid examples (0 lines, 0 malformed)" -- --data "$dir/empty.tsv"
expect 2 "--valid goes with --data" -- --valid "$dir/bad.tsv"
expect 2 "--test goes with --data" -- --task copy --test "$dir/bad.tsv"
expect 2 "--valid-size sizes the held-out part split off --data; with --valid it has no effect" -- \
  --data "$dir/bad.tsv" --valid "$dir/bad.tsv" --valid-size 10
expect 1 "$dir/empty.tsv: no valid examples" -- --data "$dir/bad.tsv" --valid "$dir/empty.tsv"
printf 'x\ty\nx\tz\n%.0s' {1..10} > "$dir/same.tsv"  # one source, twenty times
expect 1 "$dir/same.tsv: every source held out also occurs among the training pairs" -- \
  --data "$dir/same.tsv"
printf 'ok\tfine\n' > "$dir/tiny.tsv"
expect 1 "too few examples (1) to hold any out" -- --data "$dir/tiny.tsv"
expect 1 "generated training example 1 ('2038-11-05'): 10 source and 10 target tokens; --max-len 8 allows 8 and 7" -- --task dates --max-len 8 --train-size 50 --valid-size 5
# every numeric flag: zero, negative, huge, NaN, inf and words are refused before any work
for flag in steps batch train-size valid-size eval-every warmup threads max-len d-model heads \
    d-ff decoder-layers save-every seed; do
  for bad in -1 1e12 99999999999999999999 nan inf 4.5 many ""; do
    out=$(timeout 20 "$train" --$flag "$bad" --out "$dir/run" 2>&1 < /dev/null)
    code=$?
    if [[ $code != 2 || $out != *"--$flag"* ]]; then
      echo "train --$flag '$bad': expected exit 2 naming the flag, got exit $code: $out"
      exit 1
    fi
  done
done
for flag in lr dropout label-smoothing clip; do
  for bad in -1 1e300 nan inf -inf; do
    expect 2 "--$flag: must be in" -- --$flag "$bad"
  done
  expect 2 "--$flag: expected a number, got 'many'" -- --$flag many
done
expect 2 "--decoder-layers: must be in [1, 64], got 0" -- --decoder-layers 0
expect 2 "--train-size: must be in [1, 10000000], got 1000000000000" -- --train-size 1000000000000
expect 2 "--threads: must be in [1, 1024], got 100000" -- --threads 100000
expect 2 "MiniTransformerConfig: the model would hold" -- --d-model 4096 --d-ff 16384 --encoder-layers 64 --heads 8
expect 2 "--reschedule goes with --resume" -- --reschedule
expect 2 "unexpected argument 'extra'" -- extra
expect 2 "--epochs and --steps exclude each other" -- --epochs 2 --steps 10
expect 2 "--lowercase goes with --level word" -- --lowercase
[[ ! -e $dir/run ]] || { echo "a refused command created its --out"; exit 1; }
# --epochs: the steps that pass over the training pairs that many times, said
out=$("$train" --task copy --train-size 128 --valid-size 10 --epochs 1.5 --d-model 16 --heads 2 \
      --d-ff 32 --out "$dir/epochs" 2>&1) || { echo "--epochs 1.5: $out"; exit 1; }
[[ $out == *"--epochs 1.5: 3 steps of 64 of the 128 training pairs"* &&
   $(grep -c . "$dir/epochs/loss.tsv") == 3 ]] || { echo "--epochs 1.5 is not 3 steps: $out"; exit 1; }

# --batch-tokens: batches by size in tokens, and --epochs counts their batches
out=$("$train" --task copy --train-size 128 --valid-size 10 --epochs 2 --batch-tokens 200 \
      --d-model 16 --heads 2 --d-ff 32 --out "$dir/tokens" 2>&1) || { echo "--batch-tokens: $out"; exit 1; }
steps=$(grep -o -- '--epochs 2: [0-9]* steps of at most 200 tokens, [0-9]* a pass' <<< "$out")
per_epoch=$(grep -o '[0-9]* a pass' <<< "$steps" | cut -d' ' -f1)
[[ -n $steps && $(grep -c . "$dir/tokens/loss.tsv") == $((2 * per_epoch)) && $per_epoch -gt 2 ]] ||
  { echo "--epochs 2 of 200-token batches: $out"; exit 1; }

# --data: a real corpus's defaults (shared subwords fitted to the corpus, a pre-norm model of
# width 128, batches of 4096 tokens), each of which a flag turns off or changes
for i in $(seq 300); do printf 'das Haus %d\tthe house %d\n' "$i" "$i"; done > "$dir/own.tsv"
out=$("$train" --data "$dir/own.tsv" --steps 2 --out "$dir/own" 2>&1) || { echo "own corpus: $out"; exit 1; }
for setting in "level = bpe" "shared-vocab = true" "pre-norm = true" "d-model = 128" \
    "batch-tokens = 4096"; do
  grep -qx "$setting" "$dir/own/flags.conf" || { echo "own corpus: no '$setting': $(cat "$dir/own/flags.conf")"; exit 1; }
done
out=$("$train" --data "$dir/own.tsv" --steps 2 --pre-norm=false --shared-vocab=false --batch 8 \
      --out "$dir/own2" 2>&1) || { echo "own corpus, flags off: $out"; exit 1; }
for setting in "pre-norm = false" "shared-vocab = false" "batch-tokens = 0" "batch = 8"; do
  grep -qx "$setting" "$dir/own2/flags.conf" || { echo "flags off: no '$setting': $(cat "$dir/own2/flags.conf")"; exit 1; }
done
out=$("$train" --out "$dir/own2" --resume --steps 3 --reschedule 2>&1) || { echo "resume: $out"; exit 1; }
grep -qx "pre-norm = false" "$dir/own2/flags.conf" || { echo "a resume turned --pre-norm back on"; exit 1; }
expect 2 "--pre-norm: takes no value, or =true or =false" -- --pre-norm=maybe
expect 2 "--batch-tokens has no effect with --task lm" -- --task lm --data "$dir/own.tsv" --batch-tokens 9

# --config: a file of settings, flags given overriding it; the run keeps its flags as such a
# file, which gives the same run again
printf '# a small run\ntask = copy\ntrain-size = 128\nvalid-size = 10\nsteps = 9\nwarmup = 2\nd-model = 16\nheads = 2\nd-ff = 32\npre-norm = true\n' > "$dir/small.conf"
"$train" --config "$dir/small.conf" --steps 6 --out "$dir/conf1" > /dev/null 2>&1 || { echo "--config failed"; exit 1; }
[[ $(grep -c . "$dir/conf1/loss.tsv") == 6 ]] || { echo "--steps given did not override the file's"; exit 1; }
grep -qx "pre-norm = true" "$dir/conf1/flags.conf" || { echo "flags.conf: $(cat "$dir/conf1/flags.conf")"; exit 1; }
"$train" --config "$dir/conf1/flags.conf" --out "$dir/conf2" > /dev/null 2>&1 || { echo "--config flags.conf failed"; exit 1; }
cmp -s "$dir/conf1/checkpoints/step-00000006/model.safetensors" "$dir/conf2/checkpoints/step-00000006/model.safetensors" ||
  { echo "a run's flags.conf did not give the same run"; exit 1; }
printf 'steps = many\n' > "$dir/bad.conf"
expect 2 "--steps (saved in $dir/bad.conf): expected an integer, got 'many'" -- --config "$dir/bad.conf"
printf '\nsteps 10\n' > "$dir/bad.conf"
expect 2 "$dir/bad.conf:2: expected 'name = value', got 'steps 10'" -- --config "$dir/bad.conf"
printf 'resume = true\n' > "$dir/bad.conf"
expect 2 "$dir/bad.conf: 'resume' is not a setting a file gives" -- --config "$dir/bad.conf"
printf 'steps = 5\nsteps = 6\n' > "$dir/bad.conf"
expect 2 "$dir/bad.conf:2: 'steps' given twice" -- --config "$dir/bad.conf"
expect 2 "$dir/none.conf: " -- --config "$dir/none.conf"

translate=$2 classify=$3 tour=$4
bin=$(dirname "$tour")  # the book's programs and the seed notebooks' are built beside the tour
for program in "$train" "$translate" "$classify" "$tour" "$bin/score" "$bin/derivations" \
    "$bin"/seeds/seed_*; do
  out=$("$program" --help 2>&1) && [[ $out == *usage:* ]] || { echo "$program --help: $out"; exit 1; }
  out=$("$program" --bogus 2>&1); code=$?
  [[ $code == 2 && $out == *"--bogus: unknown flag"* ]] || { echo "$program --bogus: exit $code: $out"; exit 1; }
done
out=$("$bin/derivations" --chapter nope 2>&1); code=$?
[[ $code == 2 && $out == *"no chapter 'nope'"* ]] || { echo "derivations --chapter nope: exit $code: $out"; exit 1; }
out=$("$bin/seeds/seed_000_encoder_shapes" --batch 0 2>&1); code=$?
[[ $code == 2 && $out == *"--batch"* ]] || { echo "seed_000 --batch 0: exit $code: $out"; exit 1; }
for bad in 1e9 0 65 -1; do
  out=$(timeout 20 "$translate" --beam "$bad" x 2>&1); code=$?
  [[ $code == 2 && $out == *"translate: --beam: "* ]] || { echo "translate --beam $bad: exit $code: $out"; exit 1; }
done
out=$(echo x | "$bin/score" --ref "$dir/empty.tsv" 2>&1); code=$?
[[ $code == 1 && $out == *"empty.tsv: 0 reference lines for 1 hypotheses"* ]] || { echo "score: exit $code: $out"; exit 1; }
[[ $(printf 'a b c d e\n' | "$bin/score" --ref <(printf 'a b c d e\n')) == "BLEU 100.00 "*"chrF 100.00 (1 lines)" ]] ||
  { echo "score: a line against itself is not 100"; exit 1; }
out=$("$classify" --steps 0 2>&1); [[ $? == 2 && $out == *"--steps: must be in"* ]] || { echo "classify --steps 0: $out"; exit 1; }
echo "train flag and data errors: ok"
