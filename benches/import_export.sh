#!/usr/bin/env bash
# `txvfs import` and `txvfs export` of many small files, side by side with `cp -a` on the same
# disk, in one run:
#   1. builds the CLI (`cargo build --release -p txvfs-cli`);
#   2. writes a host tree of FILES entries in directories of 100 (regular files of 0-4 KiB of
#      random bytes with assorted modes and mtimes, and per directory one symlink and one hard
#      link);
#   3. copies it once with `cp -a` (warm-up), then ROUNDS times in turn times: `cp -a` host ->
#      host (the imports' baseline), `txvfs import` (batched, the default 1000 entries per
#      transaction) and `txvfs import --atomic`, each into a fresh RocksDB store, `txvfs export`
#      of the batched store back to the host, `cp -a` again (the export's baseline), and `cp -a`
#      followed by `sync -f` (durable, as the store's commits are);
#   4. checks that the exported tree equals the source: `diff -r` of contents and symlinks, and
#      type, mode, link count and mtime (ns) of every entry (not symlinks' own mtimes, which
#      the store does not keep), and that both stores pass `txvfs fsck`;
#   5. prints a markdown table: operation, files, seconds, files/s, ratio vs `cp -a`, from the
#      best of the rounds (the run least disturbed by anything else on the machine), and every
#      run's time under it.
#
#   benches/import_export.sh [FILES [ROUNDS]]     (defaults 100000 and 3; `2000 1` is a quick run)
#
# Everything runs in a fresh directory under $TXVFS_BENCH_DIR (default ${TMPDIR:-/tmp}), deleted
# at the end. Page cache: the source tree has just been written, so every run reads it from
# memory (all runs are warm; the first `cp -a` is shown apart all the same). The script does
# not drop caches (that needs root and disturbs everything else on the machine). `sync -f`
# runs after every step, untimed, so that no step pays for the previous one's writeback; inside
# the timed part only the store's commits (and the `cp -a` + `sync -f` row) wait for the disk.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
n="${1:-100000}"
rounds="${2:-3}"
[[ "$n" =~ ^[1-9][0-9]*$ && "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [FILES [ROUNDS]]" >&2; exit 2; }

cargo build --release -q -p txvfs-cli
W=$(mktemp -d "${TXVFS_BENCH_DIR:-${TMPDIR:-/tmp}}/txvfs-bench.XXXXXX")
trap 'rm -rf "$W"' EXIT
# A private copy, so that a concurrent rebuild cannot swap the binary during the run.
cp "$CARGO_TARGET_DIR/release/txvfs" "$W/txvfs"
TXVFS="$W/txvfs"

python3 - "$W/src" "$n" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(42)
modes = [0o644, 0o644, 0o644, 0o600, 0o640, 0o755]
base = 1_600_000_000 * 10**9
os.mkdir(root)
done, d = 0, 0
while done < n:
    dpath = os.path.join(root, f"d{d:04}")
    os.mkdir(dpath)
    count = min(100, n - done)
    for i in range(count):
        p = os.path.join(dpath, f"f{i:03}")
        if i == 98 and count == 100:
            os.symlink("f000", p)
        elif i == 99 and count == 100:
            os.link(os.path.join(dpath, "f001"), p)
        else:
            with open(p, "wb") as f:
                f.write(rng.randbytes(rng.randint(0, 4096)))
            os.chmod(p, rng.choice(modes))
            t = base + rng.randrange(10**17)
            os.utime(p, ns=(t, t))
    t = base + rng.randrange(10**17)
    os.utime(dpath, ns=(t, t))
    done += count
    d += 1
PY
dirs=$(find "$W/src" -mindepth 1 -type d | wc -l)
entries=$(find "$W/src" -mindepth 1 ! -type d | wc -l)
sync -f "$W"

# timed NAME CMD...: runs CMD and appends its wall time to times[NAME]; then syncs, untimed.
declare -A times
timed() {
  local name="$1"; shift
  local t0="$EPOCHREALTIME"
  "$@"
  local t1="$EPOCHREALTIME"
  times[$name]+=" $(python3 -c "print(f'{$t1 - $t0:.3f}')")"
  sync -f "$W"
}
cp_sync() { cp -a "$1" "$2" && sync -f "$2"; }

# Each round writes into a directory of its own and nothing is deleted before the end, so that
# no timed run shares the disk with the writeback of a large `rm -rf`.
timed first cp -a "$W/src" "$W/first"
for r in $(seq "$rounds"); do
  R="$W/round$r"
  mkdir "$R"
  timed cp1 cp -a "$W/src" "$R/cp1"
  "$TXVFS" --store "$R/batched" init
  timed batched "$TXVFS" --store "$R/batched" import "$W/src" /tree
  "$TXVFS" --store "$R/atomic" init
  timed atomic "$TXVFS" --store "$R/atomic" import --atomic "$W/src" /tree
  timed export "$TXVFS" --store "$R/batched" export /tree "$R/exported"
  timed cp2 cp -a "$W/src" "$R/cp2"
  timed cpsync cp_sync "$W/src" "$R/cp3"
done

# The exported tree (of the last round) must equal the source.
diff -r --no-dereference "$W/src" "$R/exported" >/dev/null || { echo "export differs from the source (diff -r)" >&2; exit 1; }
listing() {
  (cd "$1" && find . \( -type l -printf '%p l %l\n' \) -o -printf '%p %y %m %n %T@\n' | LC_ALL=C sort)
}
if ! cmp -s <(listing "$W/src") <(listing "$R/exported"); then
  echo "export differs from the source (type, mode, links or mtime):" >&2
  diff <(listing "$W/src") <(listing "$R/exported") | head >&2
  exit 1
fi
for s in batched atomic; do
  [ "$("$TXVFS" --store "$R/$s" fsck)" = clean ] || { echo "fsck of the $s store failed" >&2; exit 1; }
done

links=$((n / 100))
echo
echo "$entries entries ($((entries - 2 * links)) regular files of 0-4 KiB, $links symlinks, $links hard links) in $dirs directories;"
echo "source $(du -sh "$W/src" | cut -f1) on disk, store $(du -sh "$R/batched" | cut -f1) after the batched import. Export checked equal to the source."
echo
python3 - "$entries" "${times[first]}" "${times[cp1]}" "${times[batched]}" "${times[atomic]}" "${times[export]}" "${times[cp2]}" "${times[cpsync]}" <<'PY'
import statistics, sys
files = int(sys.argv[1])
first, cp1, batched, atomic, export, cp2, cpsync = ([float(x) for x in a.split()] for a in sys.argv[2:])
best, med = min, statistics.median
rows = [
    ("`cp -a` host → host, first run (warm-up)", first, None),
    ("`cp -a` host → host (import baseline)", cp1, cp1),
    ("`txvfs import` (batched, 1000 per transaction)", batched, cp1),
    ("`txvfs import --atomic` (one transaction)", atomic, cp1),
    ("`txvfs export` → host", export, cp2),
    ("`cp -a` host → host (export baseline)", cp2, cp2),
    ("`cp -a` host → host, then `sync -f` (durable)", cpsync, cp1),
]
print("| operation | files | seconds | files/s | ratio vs `cp -a` |")
print("|---|---|---|---|---|")
for label, t, base in rows:
    ratio = f"{best(t) / best(base):.2f}x" if base else "-"
    print(f"| {label} | {files:,} | {best(t):.2f} | {files / best(t):,.0f} | {ratio} |")
print()
print(f"Seconds: the best of {len(cp1)} round(s), each running the rows in this order. Ratio: time /")
print("`cp -a` time, lower is better (the imports and the durable copy against the import baseline,")
print("the export against the export baseline). Every run in seconds, round by round, and the median:")
for label, t, _ in rows[1:]:
    print(f"  {label}: " + ", ".join(f"{x:.2f}" for x in t) + f" (median {med(t):.2f})")
PY
