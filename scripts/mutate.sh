#!/usr/bin/env bash
# The mutation check: applies each bug of scripts/mutants.txt, one at a time, to a scratch copy
# of the tracked files, rebuilds the test binaries there and runs them; a mutant is killed when
# the suite fails (each binary stops at its first failure) or does not finish in 5 minutes.
# Prints one line per mutant and the score; exits 1 when any survives (a survivor is a missing
# test), and 2 before building anything when any mutant's text, whichever part runs, is not
# in its file. A mutant that `needs` a macro (`__AVX512F__`: its code is compiled only for a
# CPU with AVX-512) is skipped, and said so, where the build's compiler does not define it.
#   bash scripts/mutate.sh [--part K/N] [--only ID[,ID...]]
# --part K/N takes every N-th mutant starting with the K-th (CI runs a rotating seventh).
# The scratch copy is built once (Release, tests only) in $TAPEGRAD_MUTATE_DIR or a temporary
# folder, removed at the end; each mutant then recompiles one file and relinks. With
# TAPEGRAD_MUTATE_BUILD=DIR the work tree itself is mutated and restored, and DIR (a Release
# build of it) reused: for a throwaway clone, as in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
part=1/1
only=""
while (($#)); do
  case $1 in
    --part) part=$2; shift 2 ;;
    --only) only=",$2,"; shift 2 ;;
    *) echo "usage: bash scripts/mutate.sh [--part K/N] [--only ID[,ID...]]" >&2; exit 2 ;;
  esac
done
[[ $part =~ ^([0-9]+)/([0-9]+)$ ]] && ((BASH_REMATCH[1] >= 1 && BASH_REMATCH[1] <= BASH_REMATCH[2])) ||
  { echo "mutate: --part must be K/N with 1 <= K <= N, got '$part'" >&2; exit 2; }
k=${BASH_REMATCH[1]} n=${BASH_REMATCH[2]}

# The list, parsed into parallel arrays; every field checked before anything is built.
ids=() whats=() files=() finds=() replaces=() nths=() needs=()
flush() {
  [[ -z ${id:-} ]] && return
  [[ -n ${file:-} && -n ${find:-} && -n ${replace+x} ]] ||
    { echo "mutate: mutant '$id' needs file, find and replace" >&2; exit 2; }
  ids+=("$id") whats+=("${what:-}") files+=("$file") finds+=("$find") replaces+=("$replace")
  [[ -z ${need:-} || $need =~ ^__[A-Z0-9_]+__$ ]] ||
    { echo "mutate: mutant '$id' needs a macro such as __AVX512F__, got '$need'" >&2; exit 2; }
  nths+=("${nth:-0}") needs+=("${need:-}")
  unset id what file find replace nth need
}
while IFS= read -r line || [[ -n $line ]]; do
  [[ $line == \#* ]] && continue
  if [[ -z $line ]]; then flush; continue; fi
  key=${line%%: *} value=${line#*: }
  case $key in
    id | what | file | find | replace | nth) printf -v "$key" '%s' "$value" ;;
    needs) need=$value ;;
    *) echo "mutate: unknown field '$key' in scripts/mutants.txt" >&2; exit 2 ;;
  esac
done < scripts/mutants.txt
flush

# Replaces occurrence `nth` of `find` (the only one when nth is 0) in a file; with a fifth
# argument, `check`, only looks. Exit 3 when the text is missing or, without nth, not unique.
apply() {
  perl -e '
    my ($path, $find, $replace, $nth, $check) = @ARGV;
    open(my $in, "<", $path) or exit 3; local $/; my $text = <$in>; close $in;
    my $count = () = $text =~ /\Q$find\E/g;
    exit 3 if $count == 0 || ($nth == 0 && $count != 1) || $nth > $count;
    exit 0 if $check;
    my $i = 0; my $want = $nth || 1;
    $text =~ s/\Q$find\E/++$i == $want ? $replace : $&/ge;
    open(my $out, ">", $path) or exit 3; print $out $text; close $out or exit 3;' "$@"
}

# Every mutant's text must still be where it says, whichever part runs: a list gone stale
# would otherwise surface only on the day its part comes round.
stale=()
for i in "${!ids[@]}"; do
  apply "${files[i]}" "${finds[i]}" "" "${nths[i]}" check || stale+=("${ids[i]}")
done
((${#stale[@]} == 0)) ||
  { echo "mutate: find text missing or not unique, fix scripts/mutants.txt: ${stale[*]}" >&2; exit 2; }

selected=()
for i in "${!ids[@]}"; do
  if [[ -n $only ]]; then
    [[ $only == *",${ids[i]},"* ]] && selected+=("$i")
  elif ((i % n == k - 1)); then
    selected+=("$i")
  fi
done
((${#selected[@]})) || { echo "mutate: no mutant selected" >&2; exit 2; }

targets=(autograd_tests fast_room_tests nn_tests optim_tests data_tests viz_tests)
if [[ -n ${TAPEGRAD_MUTATE_BUILD:-} ]]; then
  # In place, for a throwaway clone (CI): each mutant is applied to the work tree and undone,
  # and the Release build there is reused. Refused when a tracked file has changes.
  git diff --quiet HEAD ||
    { echo "mutate: TAPEGRAD_MUTATE_BUILD needs a clean work tree" >&2; exit 2; }
  src=$PWD bld=$(cd "$TAPEGRAD_MUTATE_BUILD" && pwd) scratch=$(mktemp -d)
  trap '[[ -f $scratch/original ]] && cp "$scratch/original" "$path"; rm -rf "$scratch"' EXIT
else
  scratch=${TAPEGRAD_MUTATE_DIR:-$(mktemp -d)}
  [[ -n ${TAPEGRAD_MUTATE_DIR:-} ]] || trap 'rm -rf "$scratch"' EXIT
  src=$scratch/src bld=$scratch/build
  # The tracked files, copied where they differ from the scratch copy's (all of them the first
  # time): a copy gets a new time, so the reused build recompiles exactly what changed.
  rm -rf "$scratch/stage"
  mkdir -p "$src" "$scratch/stage"
  git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$scratch/stage"
  (cd "$scratch/stage" && find . -type f -print0) | while IFS= read -r -d '' f; do
    cmp -s "$scratch/stage/$f" "$src/$f" && continue
    mkdir -p "$(dirname "$src/$f")"
    cp "$scratch/stage/$f" "$src/$f"
  done
  cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=Release -DTAPEGRAD_BUILD_EXAMPLES=OFF > /dev/null
fi
# Builds and runs each test binary in turn, each binary stopping at its first failure, and
# the suite at its first failing binary: a mutant killed by autograd_tests never links the
# others. Returns 1 when a test fails, 2 when a build does (the log in build.log).
suite() {
  local t
  for t in "${targets[@]}"; do
    cmake --build "$bld" -j2 --target "$t" > "$scratch/build.log" 2>&1 || return 2
    (cd "$src" && timeout 300 "$bld/tests/$t" --abort) > "$scratch/suite.log" 2>&1 || return 1
  done
}
status=0
suite || status=$?
((status != 2)) || { cat "$scratch/build.log" >&2; echo "mutate: the unmutated copy does not build" >&2; exit 1; }
((status == 0)) || { tail -20 "$scratch/suite.log" >&2; echo "mutate: the unmutated suite fails" >&2; exit 1; }

# Whether the build's compiler, with the build's -march, defines the macro $1.
defines() {
  local cxx march=()
  cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$bld/CMakeCache.txt")
  grep -q '^TAPEGRAD_NATIVE:BOOL=ON$' "$bld/CMakeCache.txt" && march=(-march=native)
  "$cxx" "${march[@]}" -dM -E -x c++ /dev/null | grep -q "^#define $1 "
}

killed=0 skipped=0 survived=() start=$(date +%s)
for i in "${selected[@]}"; do
  if [[ -n ${needs[i]} ]] && ! defines "${needs[i]}"; then
    skipped=$((skipped + 1))
    printf 'skipped   %-30s its code is not in a build without %s\n' "${ids[i]}" "${needs[i]}"
    continue
  fi
  path=$src/${files[i]}
  cp -p "$path" "$scratch/original"
  if ! apply "$path" "${finds[i]}" "${replaces[i]}" "${nths[i]}"; then
    echo "mutate: mutant '${ids[i]}': its find text is not in ${files[i]} (or not unique)" >&2
    exit 1
  fi
  status=0
  suite || status=$?
  if ((status == 2)); then
    echo "mutate: mutant '${ids[i]}' does not compile; fix the list" >&2
    tail -20 "$scratch/build.log" >&2
    exit 1
  elif ((status == 0)); then
    survived+=("${ids[i]}")
    printf 'SURVIVED  %-30s %s\n' "${ids[i]}" "${whats[i]}"
  else
    killed=$((killed + 1))
    # Catch2 names the failing test case on the line after its first rule of dashes
    by=$(awk '/^------------------------------/ { getline; print; exit }' "$scratch/suite.log")
    printf 'killed    %-30s by "%s"\n' "${ids[i]}" "${by:-a crash or a timeout}"
  fi
  cp "$scratch/original" "$path"  # a newer time than the mutant's: the next build recompiles it
  touch "$path"
  rm "$scratch/original"
done
echo "mutation score: $killed of $((${#selected[@]} - skipped)) killed, $skipped skipped (part" \
  "$part of ${#ids[@]} mutants), $(($(date +%s) - start)) s"
((${#survived[@]} == 0)) || { echo "survivors, each a missing test: ${survived[*]}" >&2; exit 1; }
