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
packages=(sword-text-sparv sword-text-web libsword-utils)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing ${missing[*]}"
  sudo=$([[ $(id -u) == 0 ]] || echo sudo)
  $sudo apt-get install -y -q "${missing[@]}" > /dev/null
fi
mkdir -p "$out"

# verses of a SWORD module as "Book C:V TAB text", markup and footnotes removed
verses() {
  mod2imp "$1" 2> /dev/null | perl -CSD -ne '
    chomp;
    if (/^\$\$\$(.+ \d+:\d+)$/) { $ref = $1; next }
    next if !defined $ref || $ref =~ / 0:0$| \d+:0$/;
    s/<note\b.*?<\/note>/ /g;
    s/<[^>]*>//g;
    s/&amp;/&/g; s/&lt;/</g; s/&gt;/>/g; s/&quot;/"/g;
    s/[\t\r]+/ /g; s/\s+/ /g; s/^ | $//g; s/ ([,.;:!?])/$1/g;
    print "$ref\t$_\n" if length $_;
    undef $ref;'
}
verses spaRV1909eb > "$out/.es"
verses engWEB2015eb > "$out/.en"
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
