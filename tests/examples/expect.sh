# What the program tests share, sourced by them: counting failures, and `expect`, which runs a
# command with no input and a time limit (a hang fails) and checks its exit code and that its
# output holds a message.
fails=0
fail() { echo "FAILED: $*"; fails=$((fails + 1)); }
expect() {  # expect EXIT_CODE MESSAGE -- COMMAND...
  local code=$1 message=$2
  shift 3
  local out got
  out=$(timeout 60 "$@" 2>&1 < /dev/null)
  got=$?
  [[ $got == "$code" && $out == *"$message"* ]] ||
    fail "$*"$'\n'"  expected exit $code and '$message'"$'\n'"  got exit $got: ${out:0:600}"
}
