#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (installing clang-14 and its runtime if missing) and
# runs each for a fixed time, two at a time, from the committed seeds in fuzz/corpus/<target>/.
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 30)
# New interesting inputs go to a scratch directory; a crash leaves its input in build-fuzz/
# and makes this script fail: add it to fuzz/corpus/ and a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
missing=()
for p in clang-14 libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# -O1 with line tables, as libFuzzer's documentation builds; a unity build (see .ci/run)
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_UNITY_BUILD=ON \
  -DTAPEGRAD_FUZZ=ON -DTAPEGRAD_BUILD_TESTS=OFF -DTAPEGRAD_BUILD_EXAMPLES=OFF > /dev/null
cmake --build build-fuzz -j2 --target safetensors_fuzz tsv_fuzz vocab_fuzz config_fuzz
# Inputs up to 2 MiB (a 4 KiB cap once hid a nesting depth that overflowed the stack), and the
# JSON dictionary for the two JSON readers. libFuzzer runs on one core: two targets at a time,
# each into its own log, printed in order.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
fuzz() {
  local target=$1 scratch dict=()
  scratch=$(mktemp -d -p "$logs")
  [[ $target == safetensors || $target == config ]] && dict=(-dict=../fuzz/json.dict)
  (cd build-fuzz && "fuzz/${target}_fuzz" -max_total_time="$seconds" -max_len=2097152 \
      "${dict[@]}" -print_final_stats=1 "$scratch" "../fuzz/corpus/$target") > "$logs/$target" 2>&1
}
targets=(safetensors tsv vocab config)
declare -A pid
for target in "${targets[@]}"; do
  (($(jobs -rp | wc -l) < 2)) || wait -n || true
  fuzz "$target" &
  pid[$target]=$!
done
failed=0
for target in "${targets[@]}"; do
  status=0
  wait "${pid[$target]}" || status=$?
  grep -E "stat::number_of_executed_units|ERROR|SUMMARY|Done" "$logs/$target" | sed "s/^/$target: /" || true
  ((status == 0)) || { echo "$target: fuzzing found a failure"; failed=1; }
done
exit "$failed"
