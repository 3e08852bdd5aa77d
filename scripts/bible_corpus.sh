#!/usr/bin/env bash
# A real parallel corpus from Debian's packages: the Spanish Reina-Valera Bible of 1909
# (sword-text-sparv) and the World English Bible (sword-text-web), both in the public domain,
# aligned verse by verse. Writes DIR/train.tsv, DIR/valid.tsv and DIR/test.tsv, one
# `Spanish TAB English` verse a line: every 50th verse of the canon (from the 25th) is held out
# for validation and every 50th (from the 50th) for the test, the rest trains. Footnotes and
# markup are dropped; verses either side lacks (or merges into another) are left out, and
# verses over 300 characters (a model of --max-len 128 cannot read them) too.
#   scripts/bible_corpus.sh DIR      (installs the packages when missing; root, or sudo)
set -euo pipefail
out=${1:?usage: scripts/bible_corpus.sh DIR}
mkdir -p "$out"
verses="$(dirname "$0")/sword_verses.sh"
bash "$verses" spaRV1909eb sword-text-sparv > "$out/.es"
bash "$verses" engWEB2015eb sword-text-web > "$out/.en"
# the verses both have, in the Spanish module's order, then the split
awk -F'\t' -v out="$out" '
  NR == FNR { en[$1] = $2; next }
  ($1 in en) && length($2) <= 300 && length(en[$1]) <= 300 {
    n++
    file = n % 50 == 25 ? "valid" : n % 50 == 0 ? "test" : "train"
    print $2 "\t" en[$1] > (out "/" file ".tsv")
  }' "$out/.en" "$out/.es"
rm -f "$out/.es" "$out/.en"
wc -l "$out"/train.tsv "$out"/valid.tsv "$out"/test.tsv
