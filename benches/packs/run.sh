#!/usr/bin/env bash
# Packed images against EROFS and SquashFS, side by side in one run (issue 17):
#   1. writes a host tree of FILES files of 0..8 KiB of random bytes in three levels of
#      directories (k x k x k leaf directories of about 100 files; `packs gen`);
#   2. builds an image of it with `txvfs pack`, `mkfs.erofs` (uncompressed) and `mksquashfs`
#      (defaults: gzip, 128 KiB blocks, fragments, every core), timing each build with a
#      `sync -f` of the image (txvfs pack syncs its image itself), and reports image sizes;
#   3. mounts the EROFS and SquashFS images with the kernel (losetup -r + mount -o ro; root
#      needed); if that fails, SquashFS goes through squashfuse and EROFS is left out, and the
#      table says so;
#   4. reads SAMPLE random files (a fixed seed, the same files for all three), stat + whole
#      read each: one process per image reads them cold (after `echo 3 >
#      /proc/sys/vm/drop_caches`, when permitted; the table says if it was not), then warm
#      (the same files again); then WARM_ROUNDS (default 3) rounds, alternating between the
#      images, each a fresh process that reads the files once unmeasured and once measured.
#      The fastest warm pass of each image is reported (the machine may be shared). txvfs reads
#      through its Rust API (`Store::stat` + `read_file` on `pack:`), the others through
#      std::fs on the mount. It also counts the reader's preads per file;
#   5. prints a markdown table, with ratios against EROFS.
#
#   sudo benches/packs/run.sh [FILES [SAMPLE]]     defaults 1000000 and 20000; `10000 2000` is quick
#
# Needs erofs-utils and squashfs-tools (Debian: apt-get install erofs-utils squashfs-tools
# squashfuse). Works in a fresh directory under $TXVFS_BENCH_DIR (default /var/tmp), deleted
# at the end (about 3 x FILES x 4.5 KiB of disk). The seed is $TXVFS_BENCH_SEED (default 17).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/env.sh
FILES=${1:-1000000}
SAMPLE=${2:-20000}
SEED=${TXVFS_BENCH_SEED:-17}
for t in mkfs.erofs mksquashfs; do
  command -v "$t" >/dev/null || { echo "packs: $t is missing (apt-get install erofs-utils squashfs-tools)" >&2; exit 1; }
done
cargo build --release --quiet -p txvfs-cli -p txvfs-bench --bin txvfs --bin packs
work=$(mktemp -d "${TXVFS_BENCH_DIR:-/var/tmp}/txvfs-packs.XXXXXX")
# Private copies: a rebuild during a long run does not change the programs under test.
mkdir "$work/bin"
cp "$CARGO_TARGET_DIR/release/txvfs" "$CARGO_TARGET_DIR/release/packs" "$work/bin/"
BIN="$work/bin"
loops=()
cleanup() {
  for m in "$work/mnt-erofs" "$work/mnt-sqfs"; do
    if findmnt -rn --mountpoint "$m" >/dev/null 2>&1; then umount "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null || true; fi
  done
  for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

echo "== tree: $FILES files (seed $SEED) in $work"
t=$(now)
"$BIN/packs" gen "$work/tree" "$FILES" "$SEED"
sync -f "$work/tree"
data_bytes=$(find "$work/tree" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }')
echo "written in $(since "$t") s; file data $data_bytes bytes"
inodes=$(( $(find "$work/tree" | wc -l) ))

echo "== builds"
t=$(now); "$BIN/txvfs" pack "$work/tree" "$work/img.pack"; b_pack=$(since "$t")
t=$(now); mkfs.erofs --quiet "$work/img.erofs" "$work/tree"; sync -f "$work/img.erofs"; b_erofs=$(since "$t")
t=$(now); mksquashfs "$work/tree" "$work/img.sqfs" -no-progress >"$work/mksquashfs.out"; sync -f "$work/img.sqfs"; b_sqfs=$(since "$t")
size() { stat -c %s "$1"; }
s_pack=$(size "$work/img.pack"); s_erofs=$(size "$work/img.erofs"); s_sqfs=$(size "$work/img.sqfs")
echo "txvfs pack ${b_pack}s $s_pack B; mkfs.erofs ${b_erofs}s $s_erofs B; mksquashfs ${b_sqfs}s $s_sqfs B"
sq_tables=$(awk '/^Inode table size|^Directory table size/ { s += $4 } END { print s }' "$work/mksquashfs.out")

echo "== mounts"
mkdir -p "$work/mnt-erofs" "$work/mnt-sqfs"
how_erofs="kernel" how_sqfs="kernel"
kmount() { # TYPE IMAGE MNT
  local l
  l=$(losetup -r -f --show "$2" 2>/dev/null) || return 1
  loops+=("$l")
  mount -t "$1" -o ro "$l" "$3" 2>/dev/null
}
kmount erofs "$work/img.erofs" "$work/mnt-erofs" || how_erofs="not mounted (no loop device or not root)"
if ! kmount squashfs "$work/img.sqfs" "$work/mnt-sqfs"; then
  if command -v squashfuse >/dev/null && squashfuse "$work/img.sqfs" "$work/mnt-sqfs"; then how_sqfs="squashfuse (FUSE)"; else how_sqfs="not mounted"; fi
fi
echo "EROFS: $how_erofs; SquashFS: $how_sqfs"

dropped="yes"
drop() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || dropped="no (not permitted: cold runs are not cold)"; }

declare -A rate p50 p99
run() { # NAME COLD|WARM COMMAND... (a cold run drops the page cache first)
  local name=$1 how=$2 out
  shift 2
  [ "$how" = cold ] && drop
  out=$("$@")
  echo "$out" | sed "s/^/$name: /"
  while read -r pass _ _ fps _ l50 l99; do
    case "$pass" in cold | warm)
      # Keep the fastest warm pass.
      if [ "$pass" = cold ] || awk -v a="$fps" -v b="${rate[$name.$pass]:-0}" 'BEGIN { exit !(a > b) }'; then
        rate[$name.$pass]=$fps; p50[$name.$pass]=$l50; p99[$name.$pass]=$l99
      fi ;;
    esac
  done <<<"$out"
  if [ "$name" = txvfs ] && [ "$how" = cold ]; then preads_line=$(grep '^preads' <<<"$out"); fi
}
readers() { # COLD|WARM [warm]
  run txvfs "$1" "$BIN/packs" read-pack "$work/img.pack" "$work/tree.list" "$SAMPLE" "$SEED" ${2:-}
  [ "$how_erofs" = kernel ] && run erofs "$1" "$BIN/packs" read-dir "$work/mnt-erofs" "$work/tree.list" "$SAMPLE" "$SEED" ${2:-}
  [ "$how_sqfs" = "not mounted" ] || run squashfs "$1" "$BIN/packs" read-dir "$work/mnt-sqfs" "$work/tree.list" "$SAMPLE" "$SEED" ${2:-}
}
WARM_ROUNDS=${WARM_ROUNDS:-3}
echo "== random reads: $SAMPLE files, stat + read, cold then warm; then $WARM_ROUNDS warm rounds"
readers cold
for _ in $(seq "$WARM_ROUNDS"); do readers warm warm; done

read -r _ _ cold_preads _ warm_preads _ pack_inodes _ index_bytes _ dir_cache <<<"$preads_line"
ratio() { [ -n "${2:-}" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }' || echo "n/a"; }
row() { # NAME BUILD SIZE INDEX KEY
  local k=$5
  printf '| %s | %s | %s | %s | %s | %s | %s (%s) | %s / %s | %s (%s) | %s / %s |\n' "$1" "$2" "$3" \
    "$(awk -v s="$3" -v e="$s_erofs" 'BEGIN { printf "%.3fx", s / e }')" \
    "$(awk -v s="$3" -v d="$data_bytes" -v f="$FILES" 'BEGIN { printf "%.0f", (s - d) / f }')" "$4" \
    "${rate[$k.warm]:-n/a}" "$(ratio "${rate[$k.warm]:-}" "${rate[erofs.warm]:-}")" "${p50[$k.warm]:-n/a}" "${p99[$k.warm]:-n/a}" \
    "${rate[$k.cold]:-n/a}" "$(ratio "${rate[$k.cold]:-}" "${rate[erofs.cold]:-}")" "${p50[$k.cold]:-n/a}" "${p99[$k.cold]:-n/a}"
}
echo
echo "Packed images: $FILES files of 0-8 KiB ($inodes inodes), $SAMPLE random files read (stat + read) per pass,"
echo "warm: the fastest of $(( WARM_ROUNDS + 1 )) passes;"
echo "EROFS mounted: $how_erofs; SquashFS mounted: $how_sqfs; page cache dropped before cold runs: $dropped."
echo "Command: benches/packs/run.sh $FILES $SAMPLE (seed $SEED)"
echo
echo "| image | build s | image bytes | vs EROFS | image bytes beyond file data, per file | in-memory index B/file | warm files/s (vs EROFS) | warm p50 / p99 µs | cold files/s (vs EROFS) | cold p50 / p99 µs |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
row "txvfs pack" "$b_pack" "$s_pack" "$(awk -v b="$index_bytes" -v f="$FILES" 'BEGIN { printf "%.1f", b / f }')" txvfs
row "EROFS (mkfs.erofs, uncompressed)" "$b_erofs" "$s_erofs" "kernel caches" erofs
row "SquashFS (mksquashfs, gzip)" "$b_sqfs" "$s_sqfs" "kernel caches; tables $(awk -v b="$sq_tables" -v f="$FILES" 'BEGIN { printf "%.1f", b / f }')" squashfs
echo
echo "txvfs preads: $cold_preads for $SAMPLE cold reads, $warm_preads for $SAMPLE warm reads ($pack_inodes inodes);"
echo "File data: $data_bytes bytes. SquashFS's 'tables' are its compressed inode and directory tables per file, which"
echo "the kernel reads and caches on demand; for EROFS and SquashFS the kernel's inode and dentry caches are not measured."
echo "txvfs directory tables cached after the runs: $dir_cache bytes ($(awk -v b="$dir_cache" -v f="$FILES" 'BEGIN { printf "%.1f", b / f }') B/file), not part of the index."
