#!/usr/bin/env bash
# The style CI checks (STYLE.md): every C++ file the project tracks is clang-format clean
# (.clang-format) and opens with a comment saying what it holds, no two library headers share a
# file name, and no library file outside tapegrad/autograd/fast/ includes the fast room. Then prints the library's size:
# lines per folder of tapegrad/, and in all, with how many of them are code (not blank, not a
# comment line); and enforces the learner's folders' line budget (scripts/line_budget.py).
#   bash scripts/check_style.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format > /dev/null || {
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends clang-format
}

mapfile -t files < <(git ls-files '*.cpp' '*.h')
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run -Werror "$f" > /dev/null 2>&1; then
    echo "style: $f is not clang-format clean (clang-format -i $f)" >&2
    bad=1
  fi
  if ! head -n 1 "$f" | grep -q '^//'; then
    echo "style: $f does not open with a comment saying what it holds" >&2
    bad=1
  fi
done
# one header name, one header: a user's #include never depends on which folder comes first (a
# header kept at its old path for one release, opening "// Moved to", forwards to the new one)
dups=$(git ls-files 'tapegrad/*.h' | while read -r h; do
  head -n 1 "$h" | grep -q '^// Moved to ' || basename "$h"
done | sort | uniq -d)
if [ -n "$dups" ]; then
  echo "style: two library headers share a file name: $(echo $dups)" >&2
  bad=1
fi
# the reference room includes nothing of the fast room: fast_ops.h is the door between them
leaks=$(git grep -l '#include "tapegrad/autograd/fast/' -- tapegrad ':!tapegrad/autograd/fast' || true)
if [ -n "$leaks" ]; then
  echo "style: outside tapegrad/autograd/fast/, these include the fast room: $(echo $leaks)" >&2
  bad=1
fi
[ "$bad" = 0 ] || exit 1
echo "style: ${#files[@]} files clang-format clean, each opening with a comment; no two headers share a name; the fast room included only through fast_ops.h"

# lines and code lines of the files given on stdin
count() { awk '{ n++ } !/^[[:space:]]*$/ && !/^[[:space:]]*\/\// { c++ } END { printf "%6d lines %6d code\n", n, c }'; }
echo "library size (tapegrad/):"
for d in $(git ls-files tapegrad | grep -E '\.(h|cpp)$' | xargs -n1 dirname | sort -u); do
  printf '  %-28s' "$d"
  git ls-files "$d" | grep -E "^$d/[^/]+\.(h|cpp)$" | xargs cat | count
done
printf '  %-28s' "all"
git ls-files tapegrad | grep -E '\.(h|cpp)$' | xargs cat | count
python3 scripts/line_budget.py
