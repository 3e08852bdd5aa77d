#!/usr/bin/env bash
# The README's real-corpus recipe, end to end: Spanish -> English Bible verses from Debian's
# packages (scripts/bible_corpus.sh), a subword model trained on them, the test verses translated
# with the best checkpoint, and its BLEU and chrF beside two baselines scored the same way:
# copying the source, and the most common English verse for every line. Prints the README's
# section; with --readme FILE, writes it into FILE between the real-corpus markers.
# --run DIR scores a run this script trained before (its output in DIR.log) instead of training.
#   scripts/real_corpus.sh [--readme README.md] [--run DIR]   (from the repository, built)
set -euo pipefail
cd "$(dirname "$0")/.."
readme="" run=""
while (($#)); do
  case $1 in
    --readme) readme=${2:?--readme takes a file}; shift 2 ;;
    --run) run=${2:?--run takes a run folder}; shift 2 ;;
    *) echo "usage: scripts/real_corpus.sh [--readme FILE] [--run DIR]" >&2; exit 2 ;;
  esac
done
bin=./build/examples
data=data/bible
bash scripts/bible_corpus.sh "$data" > /dev/null
recipe=(--data "$data/train.tsv" --valid "$data/valid.tsv" --test "$data/test.tsv" --level bpe
        --vocab-size 2000 --shared-vocab --d-model 128 --heads 4 --d-ff 512 --encoder-layers 3
        --decoder-layers 3 --pre-norm --steps 3000 --warmup 300 --lr 2e-3 --eval-every 500)
if [[ -z $run ]]; then
  run=runs/bible
  for n in $(seq 2 1000); do [[ -e $run ]] || break; run=runs/bible-$n; done  # never over a run
  mkdir -p runs
  "$bin/train" "${recipe[@]}" --out "$run" > "$run.log" 2>&1 || { tail -5 "$run.log"; exit 1; }
fi
trained=$(grep -o 'trained [0-9]* steps in [0-9hm]*s\?' "$run.log")
cut -f1 "$data/test.tsv" > "$run/test.src"
cut -f2 "$data/test.tsv" > "$run/test.ref"
"$bin/translate" --run "$run" --beam 4 < "$run/test.src" > "$run/test.out"
model=$("$bin/score" --ref "$run/test.ref" "$run/test.out")
copy=$("$bin/score" --ref "$run/test.ref" "$run/test.src")
# the commonest English verse of the training part, once for every test verse (awk: no pipe
# that a reader closes early, which pipefail would count as a failure)
awk -F'\t' '{ n[$2]++ } END { for (v in n) if (n[v] > best) { best = n[v]; line = v } print line }' \
  "$data/train.tsv" > "$run/common"
awk -v n="$(wc -l < "$run/test.ref")" 'NR == 1 { for (i = 0; i < n; i++) print }' "$run/common" \
  > "$run/test.common"
frequent=$("$bin/score" --ref "$run/test.ref" "$run/test.common")
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
# a short verse to show: the first of at most 80 characters
example=$(awk 'length($0) <= 80 { print NR; exit }' "$run/test.src")
section=$(cat << EOF
<!-- real-corpus: written by scripts/real_corpus.sh -->
\`\`\`sh
bash scripts/real_corpus.sh    # installs sword-text-sparv, sword-text-web, libsword-utils
\`\`\`

It aligns the Spanish Reina-Valera Bible of 1909 with the World English Bible, both in the public \
domain, verse by verse; writes $(wc -l < "$data/train.tsv") training, $(wc -l < "$data/valid.tsv") \
validation and $(wc -l < "$data/test.tsv") test verses to \`$data/\`; trains a model of \
$(grep -o '^[0-9]* parameters' "$run.log") on them (\`train ${recipe[*]:6}\`: \
${trained#trained } on $(nproc) cores of an $cpu), and scores the test verses, translated \
with the best checkpoint and a beam of 4:

| test set, $(wc -l < "$data/test.tsv") verses | BLEU | chrF |
|---|---|---|
| this model | $(sed 's/^BLEU \([0-9.]*\).*chrF \([0-9.]*\).*/\1 | \2/' <<< "$model") |
| copying the Spanish source | $(sed 's/^BLEU \([0-9.]*\).*chrF \([0-9.]*\).*/\1 | \2/' <<< "$copy") |
| the commonest English verse, every line | $(sed 's/^BLEU \([0-9.]*\).*chrF \([0-9.]*\).*/\1 | \2/' <<< "$frequent") |

"$(sed -n "${example}p" "$run/test.src")" becomes "$(sed -n "${example}p" "$run/test.out")" \
(the World English Bible: "$(sed -n "${example}p" "$run/test.ref")").
<!-- /real-corpus -->
EOF
)
echo "$section"
if [[ -n $readme ]]; then python3 scripts/readme_section.py "$readme" real-corpus <<< "$section"; fi
