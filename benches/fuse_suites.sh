#!/usr/bin/env bash
# pjdfstest and fsx on a plain ext4 directory and on a txvfs FUSE mount, side by side in one run,
# with the configuration of tests/fuse/run (tests/fuse/pjdfstest.toml, tests/fuse/fsx.toml, the
# same fsx seeds and operation counts). Prints a markdown table of wall times and the ratio
# mount/ext4 (lower is better; 3.0x = three times slower than ext4).
#
#   benches/fuse_suites.sh
#
# Knobs: TXVFS_FSX_OPS (per seed, default 25000), TXVFS_FSX_SEED (the fifth seed; default a fixed
# one here, so every run and both sides do the same operations), TXVFS_FUSE_WORKDIR (default
# /var/tmp: the ext4 directory and the RocksDB store live there). The mount is `txvfs mount
# --allow-other` on a fresh RocksDB store with its defaults. pjdfstest's time is mostly its own
# sleeps (naptime 0.02 s, a few hundred of them), so its ratio understates the per-call cost;
# fsx's is the I/O path (pread/pwrite, mmap, truncate, fallocate, fsync, copy_file_range).
# Failures do not stop the benchmark: they are shown in the result column.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
. tests/fuse/lib.sh

export TXVFS_FSX_SEED="${TXVFS_FSX_SEED:-7160484301}"
[ -x "$TXVFS_BIN" ] || cargo build --release -q -p txvfs-cli
fuse_install_tools

BASE=$(fuse_make_work txvfs-fuse-bench)
on_exit() {
  local rc=$?
  trap - EXIT INT TERM
  fuse_stop_part
  fuse_force_cleanup || { echo "could not unmount $FUSE_MOUNT_MNT; left $BASE" >&2; exit 1; }
  fuse_reap_part
  rm -rf "$BASE"
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A private copy of the CLI, so a concurrent rebuild cannot swap it during the run.
cp "$TXVFS_BIN" "$BASE/txvfs"
TXVFS_BIN="$BASE/txvfs"
export TXVFS_BIN

declare -A secs result
# run_on TARGET DIR: both suites on DIR, each with its own scratch space.
run_on() {
  local target=$1 dir=$2 pjd_expected=""
  [ "$target" = ext4 ] || pjd_expected="$PJDFSTEST_EXPECTED"
  FUSE_WORK="$BASE/work-$target"
  export FUSE_WORK
  mkdir -p "$FUSE_WORK/logs" "$FUSE_WORK/expect" "$FUSE_WORK/artifacts"
  : >"$FUSE_WORK/summary"
  fuse_set_deadline 1800
  fuse_part pjdfstest 600 part_pjdfstest "$dir/pjdfstest" "$pjd_expected" >/dev/null || true
  secs[pjdfstest,$target]=$FUSE_PART_SECONDS
  result[pjdfstest,$target]=$(grep -m1 '^pjdfstest: ' "$FUSE_WORK/summary" | sed -E 's/^pjdfstest: //; s/ in \/.*//')
  fuse_part fsx 1200 part_fsx "$dir/fsx" >/dev/null || true
  secs[fsx,$target]=$FUSE_PART_SECONDS
  result[fsx,$target]=$(grep '^fsx: ' "$FUSE_WORK/summary" | grep -v 'random seed' | sed -E 's/^fsx: //; s/ \(.*\)//' | head -n 1)
}

echo "ext4: $BASE/ext4 ($(fuse_fstype "$BASE"))"
mkdir -p "$BASE/ext4"
run_on ext4 "$BASE/ext4"

mount_ok=1
if ! why=$(fuse_mount_available); then
  echo "mount: not available ($why); only the ext4 column is measured"
  mount_ok=0
else
  "$TXVFS_BIN" init --store "$BASE/store" >/dev/null
  fuse_mount "$BASE/store" "$BASE/mnt" "$BASE/mount.log"
  chmod 0755 "$BASE/mnt"
  run_on mount "$BASE/mnt"
  fuse_unmount >/dev/null || echo "warning: unclean unmount (see $BASE/mount.log)"
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.2fx", b / a; else print "-" }'; }
echo
echo "fsx: seeds $FSX_FIXED_SEEDS $TXVFS_FSX_SEED, $FSX_OPS operations each; pjdfstest naptime $(sed -nE 's/^naptime *= *//p' "$PJDFSTEST_CONF") s"
echo
echo "| suite | ext4 (s) | txvfs mount (s) | mount/ext4 | ext4 result | mount result |"
echo "| --- | ---: | ---: | ---: | --- | --- |"
for s in pjdfstest fsx; do
  if [ "$mount_ok" = 1 ]; then
    echo "| $s | ${secs[$s,ext4]} | ${secs[$s,mount]} | $(ratio "${secs[$s,ext4]}" "${secs[$s,mount]}") | ${result[$s,ext4]} | ${result[$s,mount]} |"
  else
    echo "| $s | ${secs[$s,ext4]} | n/a | n/a | ${result[$s,ext4]} | mount not available |"
  fi
done
