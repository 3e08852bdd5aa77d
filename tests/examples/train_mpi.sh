#!/usr/bin/env bash
# Data-parallel training is the single process's training, split: with dropout off, the loss
# curve of `mpirun -np 2` over 30 steps equals one process's to 1e-5 relative (the sums over
# processes add in another order); gradients summed in buckets during backward or all at once
# after it give the same bits; with dropout on, each process's masks come from the seed and
# its rank (two runs are identical, and differ from one process); a batch smaller than the
# number of processes still adds up; --resume with the same number of processes continues bit
# for bit, and with another is refused; all processes stop early after the same validation.
#   train_mpi.sh TRAIN MPIEXEC
set -uo pipefail
train=$1 mpiexec=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "train_mpi: $*"; exit 1; }
# CI runs as root, which Open MPI refuses without these
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# the reverse task: targets of many lengths, so each process's share of a batch's tokens is
# not a half (a learning rate that amplifies rounding less than the default's)
common=(--task reverse --lr 5e-4 --steps 30 --warmup 5 --threads 1 --eval-every 1000
        --save-every 0 --train-size 2000 --valid-size 100)
two() { "$mpiexec" --oversubscribe -np 2 "$train" "$@"; }

run() {  # run NAME COMMAND...: the command's output in NAME.log, failing the test if it fails
  local name=$1
  shift
  "$@" > "$dir/$name.log" 2>&1 || fail "$name: exit $?: $(tail -n 20 "$dir/$name.log")"
}
# the largest relative difference between two loss.tsv files' losses, over the same steps
compare() {
  paste "$1" "$2" | awk -v tol="$3" '
    $1 != $4 { print "step " $1 " against " $4; bad = 1; exit }
    { d = ($2 - $5) / $2; if (d < 0) d = -d; if (d > m) m = d; n++ }
    END { if (bad) exit 1; printf "%d steps, largest relative difference %.3g\n", n, m; exit !(n == 30 && m <= tol) }'
}

run one "$train" "${common[@]}" --dropout 0 --out "$dir/one"
run two two "${common[@]}" --dropout 0 --out "$dir/two"
grep -q "MPI: 2 processes" "$dir/two.log" || fail "two processes did not run as an MPI world: $(head "$dir/two.log")"
result=$(compare "$dir/one/loss.tsv" "$dir/two/loss.tsv" 1e-5) ||
  fail "the loss curves of one and two processes differ: $result"
echo "one process against two: $result"
# batches of 3 and one of 1 (31 examples) over three processes: a process without rows runs
# one with no weight, and the sums are still the single process's
small=(--batch 3 --train-size 31 --valid-size 10 --dropout 0)
run small_one "$train" "${common[@]}" "${small[@]}" --out "$dir/small_one"
run small_three "$mpiexec" --oversubscribe -np 3 "$train" "${common[@]}" "${small[@]}" \
  --out "$dir/small_three"
result=$(compare "$dir/small_one/loss.tsv" "$dir/small_three/loss.tsv" 1e-5) ||
  fail "batches smaller than the world: $result"
run after two "${common[@]}" --dropout 0 --bucket-kb 0 --out "$dir/after"
cmp -s "$dir/two/loss.tsv" "$dir/after/loss.tsv" ||
  fail "summing in buckets during backward and all at once after it give different losses"
cmp -s "$dir/two/checkpoints/step-00000030/model.safetensors" \
  "$dir/after/checkpoints/step-00000030/model.safetensors" ||
  fail "summing in buckets during backward and all at once after it give different weights"

# dropout: reproducible from the seed and the rank
run drop_a two "${common[@]}" --dropout 0.1 --out "$dir/drop_a"
run drop_b two "${common[@]}" --dropout 0.1 --out "$dir/drop_b"
cmp -s "$dir/drop_a/loss.tsv" "$dir/drop_b/loss.tsv" || fail "two runs with dropout differ"
run drop_one "$train" "${common[@]}" --dropout 0.1 --out "$dir/drop_one"
cmp -s "$dir/drop_a/loss.tsv" "$dir/drop_one/loss.tsv" &&
  fail "with dropout, two processes drew the masks of one"

# stopped and resumed with the same number of processes: the same bits as straight through
run stop two "${common[@]}" --dropout 0.1 --stop-after 12 --out "$dir/resumed"
run resume two --out "$dir/resumed" --resume
cmp -s "$dir/drop_a/loss.tsv" "$dir/resumed/loss.tsv" || fail "a resumed run's losses differ"
cmp -s "$dir/drop_a/checkpoints/step-00000030/model.safetensors" \
  "$dir/resumed/checkpoints/step-00000030/model.safetensors" || fail "a resumed run's weights differ"
# early stopping is agreed: every process stops after the same validation, none waits for ever
run early timeout 60 "$mpiexec" --oversubscribe -np 2 "$train" "${common[@]}" --dropout 0 \
  --eval-every 5 --best-metric exact --patience 2 --out "$dir/early"
grep -q "stopping early at step 15" "$dir/early.log" || fail "early stopping: $(tail -n 5 "$dir/early.log")"
[[ $(grep -c . "$dir/early/loss.tsv") == 15 ]] || fail "early stopping logged $(grep -c . "$dir/early/loss.tsv") steps"
out=$("$train" --out "$dir/resumed" --resume --steps 40 2>&1)
[[ $? == 2 && $out == *"the run was trained by 2 processes, this is 1 (mpirun -np 2 resumes it)"* ]] ||
  fail "resuming a 2-process run in one process: $out"
out=$(two "${common[@]}" --batch 1 --out "$dir/small" 2>&1)
[[ $? != 0 && $out == *"--batch 1 is the global batch, split over 2 processes"* ]] ||
  fail "--batch 1 over 2 processes: $out"
exit 0
