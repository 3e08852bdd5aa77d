#!/usr/bin/env bash
# The style CI checks (CONTRIBUTING.md): every C++ file the project tracks is clang-format clean
# (.clang-format) and opens with a comment saying what it holds, no two library headers share a
# file name, and no library file outside tapegrad/autograd/fast/ includes the fast room. Then
# scripts/line_budget.py prints the library's size, lines and code lines per folder of
# tapegrad/, and enforces the learner's folders' code-line budget and the one-screen functions.
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
# the reference room includes nothing of the fast room: ops/registry.h is the door between them
leaks=$(git grep -l '#include "tapegrad/autograd/fast/' -- tapegrad ':!tapegrad/autograd/fast' || true)
if [ -n "$leaks" ]; then
  echo "style: outside tapegrad/autograd/fast/, these include the fast room: $(echo $leaks)" >&2
  bad=1
fi
[ "$bad" = 0 ] || exit 1
echo "style: ${#files[@]} files clang-format clean, each opening with a comment; no two headers share a name; the fast room included only through ops/registry.h"

/usr/bin/python3 scripts/line_budget.py
