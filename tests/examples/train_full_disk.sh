#!/usr/bin/env bash
# Fault injection: a full disk. The run directory is on a small tmpfs (in a private mount
# namespace, so nothing outlives the test) that a filler file leaves only N bytes free, for N
# from a few pages to more than two checkpoints, so the disk fills at a different byte of a
# different file each time: the data split, the model, the optimizer state, a vocabulary,
# trainer.json, the `latest` pointer, loss.tsv. Each time train must stop with an error that
# names the file (never a crash), the run must load if it has a checkpoint, and once space is
# freed, resuming must end bit-identical to a run that never ran out of space.
#   train_full_disk.sh TRAIN TRANSLATE   (as root: it mounts a tmpfs)
set -euo pipefail
if [[ -z ${TAPEGRAD_IN_MOUNT_NS:-} ]]; then
  exec unshare --mount env TAPEGRAD_IN_MOUNT_NS=1 bash "$0" "$@"
fi
train=$1
translate=$2
dir=$(mktemp -d)
trap 'umount "$dir/disk" 2> /dev/null; rm -rf "$dir"' EXIT
mount --make-rprivate / 2> /dev/null || true
mkdir "$dir/disk"
mount -t tmpfs -o size=4m tmpfs "$dir/disk"
args=(--task copy --train-size 300 --valid-size 30 --eval-every 100000 --d-model 32 --d-ff 64
      --batch 16 --seed 9 --warmup 5 --steps 24)
"$train" "${args[@]}" --save-every 0 --out "$dir/straight" > /dev/null 2>&1

free_bytes() { echo $(($(stat -f -c '%a * %S' "$dir/disk"))); }
# the bytes a run takes up to its first checkpoint: a page-by-page sweep below that fills the
# disk in each of the checkpoint's small files and the `latest` pointer
empty=$(free_bytes)
"$train" "${args[@]}" --save-every 4 --stop-after 4 --out "$dir/disk/run" > /dev/null 2>&1
first=$((empty - $(free_bytes)))
sweep=()
for pages in 1 2 3 4 5 6 7 8; do sweep+=($((first - pages * 4096))); done
failed=0
for free in "${sweep[@]}" $((8 << 10)) $((24 << 10)) $((120 << 10)) $((300 << 10)) $((700 << 10)) \
    $((1000 << 10)) $((1300 << 10)) $((1500 << 10)) $((1700 << 10)) $((1900 << 10)); do
  free_kib=$((free >> 10))
  run="$dir/disk/run"
  rm -rf "$run" "$dir/disk/filler"
  fallocate -l $(($(free_bytes) - free)) "$dir/disk/filler"
  set +e
  "$train" "${args[@]}" --save-every 4 --out "$run" > /dev/null 2> "$dir/err"
  code=$?
  set -e
  if ((code >= 128 || code == 2)); then
    echo "free ${free_kib} KiB: exit $code: $(cat "$dir/err")"
    exit 1
  fi
  if ((code == 1)); then
    failed=$((failed + 1))
    grep -q "No space left on device\|write failed" "$dir/err" || {
      echo "free ${free_kib} KiB: the error does not say the disk is full: $(cat "$dir/err")"
      exit 1
    }
    grep -q "^train: $dir/disk/run/" "$dir/err" || {
      echo "free ${free_kib} KiB: the error does not name the file: $(cat "$dir/err")"
      exit 1
    }
  fi
  rm "$dir/disk/filler"
  if [[ -f $run/latest ]]; then
    "$translate" --run "$run" "abc" > /dev/null
    if [[ $(cat "$run/latest") != step-00000024 ]]; then
      "$train" --out "$run" --resume --save-every 0 > /dev/null 2>&1
    fi
  else
    "$train" "${args[@]}" --save-every 0 --out "$run" --replace > /dev/null 2>&1
  fi
  for f in checkpoints/step-00000024/model.safetensors checkpoints/step-00000024/optimizer.safetensors loss.tsv; do
    cmp "$dir/straight/$f" "$run/$f"
  done
  echo "free ${free_kib} KiB: $(if ((code == 1)); then tail -1 "$dir/err" | sed "s|$dir/disk/run/||"; else echo "no failure"; fi)"
done
((failed >= 15)) || { echo "only $failed of the sizes made the disk fill up"; exit 1; }
echo "full disk at $failed offsets: an error naming the file each time, and exact resumes"
