#!/usr/bin/env bash
# The consumer project's check, as CI runs it: install tapegrad from BUILD (a configured and
# built tree) into a temporary prefix, build tests/consumer against it alone, run its Catch2
# test and its own training program (a run over the installed Trainer), train a short date run
# with TRAIN and decode with the consumer's program through the installed load_pretrained,
# which must print what TRANSLATE prints; then build that program again with nothing but
# pkg-config's flags.
#   bash tests/consumer/run.sh BUILD TRAIN TRANSLATE
set -euo pipefail
build=$1 train=$2 translate=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > /dev/null
cmake -S "$here" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release \
  > /dev/null
cmake --build "$work/build" -j2 > /dev/null
"$work/build/my_layer_test"
# the user's own trainer: a run folder whose checkpoint loads back as a pretrained model
"$work/build/train_own" "$work/own" > "$work/own.log" ||
  { cat "$work/own.log" >&2; echo "consumer: train_own failed" >&2; exit 1; }
grep -q "exact match" "$work/own.log" && [[ -f $work/own/report.html && -s $work/own/latest ]] ||
  { cat "$work/own.log" >&2; echo "consumer: train_own left no run" >&2; exit 1; }
"$train" --steps 300 --out "$work/run" > /dev/null
checkpoint="$work/run/checkpoints/$(cat "$work/run/latest")"
sources=("Friday, 22 February 1974" "Mar 4, 2025" "the 1st of june 1999")
got=$("$work/build/decode" "$checkpoint" "${sources[@]}")
want=$("$translate" --run "$work/run" "${sources[@]}")
[[ $got == "$want" ]] || { printf 'consumer: decode printed\n%s\ntranslate printed\n%s\n' "$got" "$want" >&2; exit 1; }
PKG_CONFIG_PATH=$(dirname "$(find "$work/prefix" -name tapegrad.pc)")
export PKG_CONFIG_PATH
pkg-config --exists 'tapegrad >= 0.8' || { echo "consumer: pkg-config finds no tapegrad 0.8" >&2; exit 1; }
# shellcheck disable=SC2046  # pkg-config's flags are meant to split
g++ -O1 -o "$work/decode_pc" "$here/decode.cpp" $(pkg-config --cflags --libs tapegrad)
[[ $("$work/decode_pc" "$checkpoint" "${sources[@]}") == "$want" ]] ||
  { echo "consumer: the pkg-config build decodes differently" >&2; exit 1; }
echo "consumer: the installed package builds, passes its test and decodes a trained run"
