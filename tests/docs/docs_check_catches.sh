#!/usr/bin/env bash
# docs_check must fail when a page and its program disagree: a block whose number moved past the
# tolerance, a word changed, a drawn file edited, a quote of the source edited, or a missing
# block; and pass once --update has rewritten them. It must fail, too, when a page names a
# function or a type no source has.
#   docs_check_catches.sh DOCS_CHECK EXAMPLES_DIR
set -uo pipefail
check=$1 bin=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/docs/images" "$dir/tapegrad"
printf 'int twice_of(int x) {\n  return 2 * x;\n}\nstruct Doubler {};\n' > "$dir/tapegrad/f.cpp"
cat > "$dir/docs/page.md" << 'PAGE'
# a page
`twice_of()` doubles, `tapegrad::twice_of` is its full name, `-ffast_math` is a flag, `Doubler`
a type, `NOTE` a word in capitals.
<!-- output: derivations --chapter embedding -->
```text
```
<!-- file: images/tape.svg by: tour --draw {dir} -->
<!-- source: tapegrad/f.cpp int twice_of( -->
```cpp
```
PAGE
"$check" "$dir/docs" "$bin" --update > /dev/null || { echo "--update failed"; exit 1; }
out=$("$check" "$dir/docs" "$bin") || { echo "a fresh page fails: $out"; exit 1; }
expect_failure() {  # what: a sed script that spoils the page or the file
  cp "$dir/docs/$2" "$dir/saved"
  sed -i "$3" "$dir/docs/$2"
  out=$("$check" "$dir/docs" "$bin" 2>&1) && { echo "not caught: $1"; exit 1; }
  [[ $out == *"differs"* ]] || { echo "$1: no 'differs' in: $out"; exit 1; }
  cp "$dir/saved" "$dir/docs/$2"
}
expect_failure "a number off by 3 units of its last digit" page.md 's/6.000000, 8.000000/6.000003, 8.000000/'
expect_failure "a word changed" page.md 's/padding id 0/padding id zero/'
expect_failure "a line missing" page.md '/largest difference/d'
expect_failure "a quote edited" page.md 's/return 2 \* x;/return x + x;/'
expect_failure "a drawn file edited" images/tape.svg 's/#fff3c4/#fff3c5/'
out=$("$check" "$dir/docs" "$bin") || { echo "the restored page fails: $out"; exit 1; }
for gone in 's/`twice_of()`/`thrice_of()`/' 's/tapegrad::twice_of/tapegrad::half/' \
    's/`Doubler`/`Tripler`/'; do
  cp "$dir/docs/page.md" "$dir/saved"
  sed -i "$gone" "$dir/docs/page.md"
  out=$("$check" "$dir/docs" "$bin" 2>&1) && { echo "not caught: a function gone ($gone)"; exit 1; }
  [[ $out == *"which no source of the repository has"* ]] || { echo "$gone: $out"; exit 1; }
  cp "$dir/saved" "$dir/docs/page.md"
done
# within tolerance: a difference of one unit of the last printed digit passes
sed -i 's/6.000000, 8.000000/6.000001, 8.000000/' "$dir/docs/page.md"
out=$("$check" "$dir/docs" "$bin") || { echo "one unit of the last digit fails: $out"; exit 1; }
echo "docs_check catches every spoiled page"
