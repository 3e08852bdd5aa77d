#!/usr/bin/env bash
# The language-model recipe of docs/language_model.md, end to end: the World English Bible from Debian's
# sword-text-web (public domain) as one plain text, a verse a line; `train --task lm` on it with
# its defaults (nanoGPT's CPU recipe: 4 layers, 4 heads, width 128, block 64, batch 12, 2000
# steps, AdamW); and a sample of the best checkpoint. Prints the page's section; with
# --readme FILE, writes it into FILE between the real-text markers. --run DIR describes a run
# this script trained before (its output in DIR.log) instead of training. --pytorch also runs
# the same recipe in PyTorch (bench/lm_side_by_side.py: nanoGPT's model and loop, Debian's
# python3-torch) on the same text and split, and says how it compares.
#   scripts/real_text.sh [--readme docs/language_model.md] [--run DIR] [--pytorch]   (from the repository, built)
set -euo pipefail
cd "$(dirname "$0")/.."
readme="" run="" pytorch=""
while (($#)); do
  case $1 in
    --readme) readme=${2:?--readme takes a file}; shift 2 ;;
    --run) run=${2:?--run takes a run folder}; shift 2 ;;
    --pytorch) pytorch=yes; shift ;;
    *) echo "usage: scripts/real_text.sh [--readme FILE] [--run DIR] [--pytorch]" >&2; exit 2 ;;
  esac
done
bin=./build/examples
text=data/web/web.txt
mkdir -p data/web
bash scripts/sword_verses.sh engWEB2015eb sword-text-web | cut -f2 > "$text"
if [[ -z $run ]]; then
  run=runs/web
  for n in $(seq 2 1000); do [[ -e $run ]] || break; run=runs/web-$n; done  # never over a run
  mkdir -p runs
  "$bin/train" --task lm --data "$text" --out "$run" > "$run.log" 2>&1 ||
    { tail -5 "$run.log"; exit 1; }
fi
trained=$(grep -o 'trained [0-9]* steps in [0-9hm]*s\?' "$run.log")
prompt="And Jesus said to them,"
sample=$("$bin/sample" --run "$run" --prompt "$prompt" --max-new-tokens 400 --temperature 0.8 \
  --seed 1)
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
read -r best best_step < <(sed -n 's/^best checkpoint: loss \([0-9.]*\) at step \([0-9]*\).*/\1 \2/p' \
  "$run.log")
bits=$(awk -v l="$best" 'BEGIN { printf "%.3f", l / log(2) }')
peer=""
if [[ -n $pytorch ]]; then  # PyTorch's best setting here: its own threads at 1, OpenBLAS at 2
  core=()  # Debian's OpenBLAS runs its AVX2 kernels on recent AMD cores unless told
  if grep -qw avx512f /proc/cpuinfo; then core=(OPENBLAS_CORETYPE=SKYLAKEX); fi
  peer=$(env OPENBLAS_NUM_THREADS=2 "${core[@]}" /usr/bin/python3 bench/lm_side_by_side.py "$text")
  peer=" The same recipe in PyTorch on the same text and split (\`bench/lm_side_by_side.py\`: \
nanoGPT's model and train.py loop, its evaluations every 250 steps and its checkpoints \
included), on this machine: $peer."
fi
section=$(cat << EOF
<!-- real-text: written by scripts/real_text.sh -->
\`\`\`sh
bash scripts/real_text.sh    # installs sword-text-web and libsword-utils
\`\`\`

It writes the World English Bible (public domain), a verse a line, to \`$text\` ($(wc -c < "$text") \
bytes), and trains a character-level language model of $(grep -o '^[0-9]* parameters' "$run.log") \
on it with \`train --task lm --data $text\`, whose defaults are nanoGPT's CPU recipe: \
${trained#trained }, a validation and a sample every 250 steps included, on $(nproc) cores of an \
$cpu. The last tenth of the text is held out: the \
best checkpoint's loss on it, $best at step $best_step, is $bits bits per character.$peer \
\`sample --run $run --prompt "$prompt" --temperature 0.8 --seed 1\` continues:

\`\`\`text
$sample
\`\`\`
<!-- /real-text -->
EOF
)
echo "$section"
if [[ -n $readme ]]; then python3 scripts/readme_section.py "$readme" real-text <<< "$section"; fi
