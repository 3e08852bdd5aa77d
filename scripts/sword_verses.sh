#!/usr/bin/env bash
# The verses of a Bible from Debian's SWORD packages, one "Book C:V TAB text" a line in the
# module's order, with footnotes and markup removed. Installs the package and libsword-utils
# (mod2imp) when missing (root, or sudo).
#   scripts/sword_verses.sh MODULE PACKAGE    e.g. engWEB2015eb sword-text-web
set -euo pipefail
module=${1:?usage: scripts/sword_verses.sh MODULE PACKAGE}
package=${2:?usage: scripts/sword_verses.sh MODULE PACKAGE}
missing=()
for p in "$package" libsword-utils; do
  dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing ${missing[*]}" >&2
  sudo=$([[ $(id -u) == 0 ]] || echo sudo)
  $sudo apt-get install -y -q "${missing[@]}" > /dev/null
fi
mod2imp "$module" 2> /dev/null | perl -CSD -ne '
  chomp;
  if (/^\$\$\$(.+ \d+:\d+)$/) { $ref = $1; next }
  next if !defined $ref || $ref =~ / 0:0$| \d+:0$/;
  s/<note\b.*?<\/note>/ /g;
  s/<[^>]*>//g;
  s/&amp;/&/g; s/&lt;/</g; s/&gt;/>/g; s/&quot;/"/g;
  s/[\t\r]+/ /g; s/\s+/ /g; s/^ | $//g; s/ ([,.;:!?])/$1/g;
  print "$ref\t$_\n" if length $_;
  undef $ref;'
