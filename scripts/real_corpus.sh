#!/usr/bin/env bash
# The real corpora of docs/own_data.md, end to end, each trained with train's defaults for a corpus of
# pairs. bible (the default): Spanish -> English Bible verses from Debian's packages
# (scripts/bible_corpus.sh); dictionary: German -> English dictionary entries
# (scripts/dictionary_corpus.sh), short ones. Either way the test lines are translated with the
# best checkpoint and scored beside two baselines scored the same way: copying the source, and
# the commonest target line of the training part for every line. Prints the page's section; with --readme
# FILE, writes it into FILE between the corpus's markers. --run DIR scores a run this script
# trained before (its output in DIR.log) instead of training.
#   scripts/real_corpus.sh [bible|dictionary] [--readme docs/own_data.md] [--run DIR]   (built)
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=bible readme="" run=""
while (($#)); do
  case $1 in
    bible | dictionary) corpus=$1; shift ;;
    --readme) readme=${2:?--readme takes a file}; shift 2 ;;
    --run) run=${2:?--run takes a run folder}; shift 2 ;;
    *) echo "usage: scripts/real_corpus.sh [bible|dictionary] [--readme FILE] [--run DIR]" >&2
       exit 2 ;;
  esac
done
bin=./build/examples
data=data/$corpus
if [[ $corpus == bible ]]; then
  bash scripts/bible_corpus.sh "$data" > /dev/null
  marker=real-corpus installs="sword-text-sparv, sword-text-web, libsword-utils" unit=verses
  what="It aligns the Spanish Reina-Valera Bible of 1909 with the World English Bible, both in \
the public domain, verse by verse"
  source_name="the Spanish source" common="the commonest English verse"
else
  bash scripts/dictionary_corpus.sh "$data" > /dev/null
  marker=real-dictionary installs=dict-freedict-deu-eng unit=entries
  what="It takes 60000 headwords of FreeDict's German-English dictionary (GPL 3) with the first \
translation of each"
  source_name="the German headword" common="the commonest English entry"
fi
if [[ -z $run ]]; then
  run=runs/$corpus
  for n in $(seq 2 1000); do [[ -e $run ]] || break; run=runs/$corpus-$n; done  # never over a run
  mkdir -p runs
  "$bin/train" --data "$data/train.tsv" --valid "$data/valid.tsv" --test "$data/test.tsv" \
    --out "$run" > "$run.log" 2>&1 || { tail -5 "$run.log"; exit 1; }
fi
trained=$(grep -o 'trained [0-9]* steps in [0-9hm]*s\?' "$run.log")
cut -f1 "$data/test.tsv" > "$run/test.src"
cut -f2 "$data/test.tsv" > "$run/test.ref"
"$bin/translate" --run "$run" --beam 4 < "$run/test.src" > "$run/test.out"
model=$("$bin/score" --ref "$run/test.ref" "$run/test.out")
copy=$("$bin/score" --ref "$run/test.ref" "$run/test.src")
# the commonest target line of the training part, once for every test line (awk: no pipe
# that a reader closes early, which pipefail would count as a failure)
awk -F'\t' '{ n[$2]++ } END { for (v in n) if (n[v] > best) { best = n[v]; line = v } print line }' \
  "$data/train.tsv" > "$run/common"
awk -v n="$(wc -l < "$run/test.ref")" 'NR == 1 { for (i = 0; i < n; i++) print }' "$run/common" \
  > "$run/test.common"
frequent=$("$bin/score" --ref "$run/test.ref" "$run/test.common")
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
# a short line to show: the first of at most 80 characters
example=$(awk 'length($0) <= 80 { print NR; exit }' "$run/test.src")
section=$(cat << EOF
<!-- $marker: written by scripts/real_corpus.sh -->
\`\`\`sh
bash scripts/real_corpus.sh$([[ $corpus == bible ]] || echo " $corpus")    # installs $installs
\`\`\`

$what; writes $(wc -l < "$data/train.tsv") training, $(wc -l < "$data/valid.tsv") \
validation and $(wc -l < "$data/test.tsv") test $unit to \`$data/\`; trains a model of \
$(grep -o '^[0-9]* parameters' "$run.log") on them with train's defaults (\`train --data \
$data/train.tsv --valid $data/valid.tsv --test $data/test.tsv\`: ${trained#trained } on \
$(nproc) cores of an $cpu), and scores the test $unit, translated with the best checkpoint \
and a beam of 4:

| test set, $(wc -l < "$data/test.tsv") $unit | BLEU | chrF |
|---|---|---|
| this model | $(sed 's/^BLEU \([0-9.]*\).*chrF \([0-9.]*\).*/\1 | \2/' <<< "$model") |
| copying $source_name | $(sed 's/^BLEU \([0-9.]*\).*chrF \([0-9.]*\).*/\1 | \2/' <<< "$copy") |
| $common, every line | $(sed 's/^BLEU \([0-9.]*\).*chrF \([0-9.]*\).*/\1 | \2/' <<< "$frequent") |

"$(sed -n "${example}p" "$run/test.src")" becomes "$(sed -n "${example}p" "$run/test.out")" \
(the reference: "$(sed -n "${example}p" "$run/test.ref")").
<!-- /$marker -->
EOF
)
echo "$section"
if [[ -n $readme ]]; then python3 scripts/readme_section.py "$readme" "$marker" <<< "$section"; fi
