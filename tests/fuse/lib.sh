# Shared pieces of tests/fuse/run and benches/fuse_suites.sh (sourced, not run).
#
# The external POSIX suites (pjdfstest 0.2.2, fsx 0.3.2 from crates.io), git and sqlite3, run on
# a directory: a txvfs FUSE mount, or a plain host (ext4) directory for the baseline.
#
# Each part is a function `part_NAME DIR` that prints one summary line "NAME: ..." and exits
# non-zero on a failure; fuse_part runs it in its own bash (so `set -e` holds inside it) under
# a timeout. Needs: FUSE_WORK (a scratch directory: logs, artifacts, expected values).

FUSE_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FUSE_ROOT="$(cd "$FUSE_HERE/../.." && pwd)"
FUSE_LIB="$FUSE_HERE/lib.sh"
export FUSE_HERE FUSE_ROOT FUSE_LIB

# Pinned tools, installed with `cargo install --locked` into one root outside the clone, built in
# their own target directory (not the workspace's).
FUSE_TOOLS="${TXVFS_TOOLS:-$HOME/.cache/txvfs/tools}"
FUSE_TOOLS_TARGET="$HOME/.cache/txvfs/tools-target"
PJDFSTEST_VERSION=0.2.2
FSX_VERSION=0.3.2
PJDFSTEST="$FUSE_TOOLS/bin/pjdfstest"
FSX="$FUSE_TOOLS/bin/fsx"
PJDFSTEST_CONF="$FUSE_HERE/pjdfstest.toml"
PJDFSTEST_EXPECTED="$FUSE_HERE/pjdfstest.expected-failures"
FSX_CONF="$FUSE_HERE/fsx.toml"
export FUSE_TOOLS PJDFSTEST FSX PJDFSTEST_CONF PJDFSTEST_EXPECTED FSX_CONF

# fsx: fixed seeds only by default (the same operation sequences every run: CI is repeatable);
# TXVFS_FSX_SEED=random adds one fresh seed, printed, and TXVFS_FSX_SEED=N replays it.
# 5 runs x 25,000 operations = 125,000 operations.
FSX_FIXED_SEEDS="${TXVFS_FSX_FIXED_SEEDS:-1 2 3 4 20240601}"
FSX_OPS="${TXVFS_FSX_OPS:-25000}"
export FSX_FIXED_SEEDS FSX_OPS

fuse_die() { echo "error: $*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------
# Tools

fuse_tool_ok() { # NAME VERSION
  [ -x "$FUSE_TOOLS/bin/$1" ] && [ "$("$FUSE_TOOLS/bin/$1" --version 2>/dev/null)" = "$1 $2" ]
}

# Installs pjdfstest and fsx (pinned, --locked) unless the right versions are there already.
fuse_install_tools() {
  local want=()
  fuse_tool_ok pjdfstest "$PJDFSTEST_VERSION" || want+=("pjdfstest@$PJDFSTEST_VERSION")
  fuse_tool_ok fsx "$FSX_VERSION" || want+=("fsx@$FSX_VERSION")
  [ ${#want[@]} -eq 0 ] && return 0
  echo "installing ${want[*]} into $FUSE_TOOLS (log: $FUSE_TOOLS_TARGET/install.log)"
  mkdir -p "$FUSE_TOOLS" "$FUSE_TOOLS_TARGET"
  # One installer at a time (the test suite and the benchmark may start together).
  if ! flock "$FUSE_TOOLS_TARGET/.lock" env CARGO_TARGET_DIR="$FUSE_TOOLS_TARGET" \
      cargo install --locked --force --root "$FUSE_TOOLS" "${want[@]}" \
      >"$FUSE_TOOLS_TARGET/install.log" 2>&1; then
    tail -n 30 "$FUSE_TOOLS_TARGET/install.log" >&2
    fuse_die "cargo install ${want[*]} failed"
  fi
  fuse_tool_ok pjdfstest "$PJDFSTEST_VERSION" || fuse_die "pjdfstest $PJDFSTEST_VERSION missing after install"
  fuse_tool_ok fsx "$FSX_VERSION" || fuse_die "fsx $FSX_VERSION missing after install"
}

# ---------------------------------------------------------------------------------------------
# Scratch space, the host (ext4) target, the mount

# A scratch directory on the host file system, traversable by the dummy users of pjdfstest.
fuse_make_work() { # PREFIX
  local w
  w=$(mktemp -d "${TXVFS_FUSE_WORKDIR:-/var/tmp}/$1.XXXXXX")
  chmod 0755 "$w"
  mkdir -p "$w/logs" "$w/expect" "$w/artifacts"
  echo "$w"
}

fuse_fstype() { stat -f -c %T "$1"; }

fuse_is_mounted() { findmnt -rn --mountpoint "$1" >/dev/null 2>&1; }

TXVFS_BIN="${TXVFS_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/txvfs/target}/release/txvfs}"
export TXVFS_BIN

# Is `txvfs mount` built, with the interface this harness uses? (prints why not)
fuse_mount_available() {
  local help
  [ -x "$TXVFS_BIN" ] || { echo "$TXVFS_BIN does not exist"; return 1; }
  help=$("$TXVFS_BIN" mount --help 2>&1) || { echo "txvfs mount --help failed: $help"; return 1; }
  grep -q -- '--allow-other' <<<"$help" || { echo "txvfs mount has no --allow-other: $(head -n 1 <<<"$help")"; return 1; }
  [ -e /dev/fuse ] || { echo "/dev/fuse does not exist"; return 1; }
  command -v fusermount3 >/dev/null || { echo "fusermount3 is not installed (fuse3)"; return 1; }
}

# Mounts STORE on MNT in the background; sets FUSE_MOUNT_PID. The mount's output goes to LOG.
# Waits until the kernel shows the mount, at most TXVFS_FUSE_MOUNT_WAIT seconds (default 30).
FUSE_MOUNT_PID=""
FUSE_MOUNT_MNT=""
FUSE_MOUNT_LOG=""
fuse_mount() { # STORE MNT LOG
  local store=$1 mnt=$2 log=$3 waited=0 wait_max="${TXVFS_FUSE_MOUNT_WAIT:-30}"
  mkdir -p "$mnt"
  FUSE_MOUNT_MNT=$mnt
  FUSE_MOUNT_LOG=$log
  "$TXVFS_BIN" mount --store "$store" "$mnt" --allow-other >"$log" 2>&1 &
  FUSE_MOUNT_PID=$!
  while ! fuse_is_mounted "$mnt"; do
    if ! kill -0 "$FUSE_MOUNT_PID" 2>/dev/null; then
      local rc=0
      wait "$FUSE_MOUNT_PID" || rc=$?
      FUSE_MOUNT_PID=""
      echo "txvfs mount exited with status $rc before the mount appeared; its output:" >&2
      sed 's/^/  | /' "$log" >&2
      return 1
    fi
    if [ "$waited" -ge $((wait_max * 10)) ]; then
      echo "txvfs mount (pid $FUSE_MOUNT_PID) did not mount $mnt within ${wait_max}s; its output:" >&2
      sed 's/^/  | /' "$log" >&2
      return 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  echo "mounted $store on $mnt ($(findmnt -rn -o FSTYPE,OPTIONS --mountpoint "$mnt"), pid $FUSE_MOUNT_PID)"
}

# Clean unmount: SIGTERM to the mount process; it must exit 0 within TXVFS_FUSE_UMOUNT_WAIT
# seconds (default 30) and leave MNT unmounted.
fuse_unmount() {
  local pid=$FUSE_MOUNT_PID mnt=$FUSE_MOUNT_MNT waited=0 wait_max="${TXVFS_FUSE_UMOUNT_WAIT:-30}" rc=0
  [ -n "$pid" ] || { echo "fuse_unmount: no mount process" >&2; return 1; }
  kill -TERM "$pid"
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$waited" -ge $((wait_max * 10)) ]; then
      echo "txvfs mount (pid $pid) still running ${wait_max}s after SIGTERM; its output:" >&2
      tail -n 40 "$FUSE_MOUNT_LOG" | sed 's/^/  | /' >&2
      return 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  wait "$pid" || rc=$?
  FUSE_MOUNT_PID=""
  if [ "$rc" -ne 0 ]; then
    echo "txvfs mount exited with status $rc after SIGTERM (want 0); its output:" >&2
    tail -n 40 "$FUSE_MOUNT_LOG" | sed 's/^/  | /' >&2
    return 1
  fi
  if fuse_is_mounted "$mnt"; then
    echo "txvfs mount exited 0 but $mnt is still mounted" >&2
    return 1
  fi
  echo "unmount: SIGTERM, exit status 0, $mnt no longer mounted"
}

# For traps: whatever state we are in, leave no mount and no mount process behind.
fuse_force_cleanup() {
  local pid=$FUSE_MOUNT_PID mnt=$FUSE_MOUNT_MNT i
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "cleanup: txvfs mount (pid $pid) ignored SIGTERM; SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  fi
  FUSE_MOUNT_PID=""
  if [ -n "$mnt" ] && fuse_is_mounted "$mnt"; then
    echo "cleanup: $mnt still mounted; fusermount3 -u -z" >&2
    fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
  fi
  if [ -n "$mnt" ] && fuse_is_mounted "$mnt"; then
    echo "cleanup: could not unmount $mnt" >&2
    return 1
  fi
  return 0
}

# ---------------------------------------------------------------------------------------------
# Running parts

# An overall deadline (epoch seconds) for the parts, so one hung part cannot hold the suite:
# each part gets min(its own limit, the time left).
fuse_set_deadline() { FUSE_DEADLINE=$(( $(date +%s) + $1 )); export FUSE_DEADLINE; }
fuse_budget() { # MAX
  local left=$(( ${FUSE_DEADLINE:-0} - $(date +%s) ))
  [ -n "${FUSE_DEADLINE:-}" ] || left=$1
  [ "$left" -lt "$1" ] || left=$1
  [ "$left" -ge 5 ] || left=5
  echo "$left"
}

# fuse_part NAME MAX_SECONDS FUNCTION ARGS...: runs FUNCTION in a fresh bash under a timeout,
# in the background (so a signal to the script stops it at once: see fuse_stop_part), its
# output streamed and kept in logs/NAME.out. Returns its status; appends its "NAME: ..." lines
# to $FUSE_WORK/summary; sets FUSE_PART_SECONDS.
FUSE_PART_PID=""
FUSE_PART_TAIL=""
fuse_part() {
  local name=$1 max=$2 t rc=0 start out
  shift 2
  t=$(fuse_budget "$max")
  out="$FUSE_WORK/logs/$name.out"
  : >"$out"
  start=$(date +%s.%N)
  echo "== $name"
  timeout -k 10 "$t" bash -c 'set -euo pipefail; . "$FUSE_LIB"; "$@"' "$name" "$@" </dev/null >"$out" 2>&1 &
  FUSE_PART_PID=$!
  tail -n +1 -s 0.2 -f --pid="$FUSE_PART_PID" "$out" &
  FUSE_PART_TAIL=$!
  wait "$FUSE_PART_PID" || rc=$?
  wait "$FUSE_PART_TAIL" || true
  FUSE_PART_PID=""
  FUSE_PART_TAIL=""
  FUSE_PART_SECONDS=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "$name: FAILED: timed out after ${t}s" | tee -a "$FUSE_WORK/summary"
  elif [ "$rc" -ne 0 ]; then
    grep -E "^$name: " "$out" >>"$FUSE_WORK/summary" \
      || echo "$name: FAILED (status $rc)" | tee -a "$FUSE_WORK/summary"
  else
    grep -E "^$name: " "$out" >>"$FUSE_WORK/summary" || true
  fi
  return "$rc"
}

# For traps: stop a running part (timeout passes the signal to the part's process group).
fuse_stop_part() {
  local pid=$FUSE_PART_PID
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    echo "cleanup: stopping the running part (pid $pid)" >&2
    kill -TERM "$pid" 2>/dev/null || true
  fi
  [ -z "$FUSE_PART_TAIL" ] || kill "$FUSE_PART_TAIL" 2>/dev/null || true
}

# Waits (at most 15 s) for a stopped part to end; after the mount is gone it cannot block.
fuse_reap_part() {
  local pid=$FUSE_PART_PID i
  [ -n "$pid" ] || return 0
  for i in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  FUSE_PART_PID=""
}

# ---------------------------------------------------------------------------------------------
# The parts. Each takes the directory to work in (created), and prints "NAME: ..." last.

# Test names (one a line) listed in the expected-failures file; fails on a line without reason.
fuse_expected_failures() { # FILE
  local line name reason n=0
  while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    name=${line%%#*}
    name=$(echo "$name" | tr -d '[:space:]')
    [ -n "$name" ] || continue
    reason=""
    [[ "$line" == *"#"* ]] && reason=$(echo "${line#*#}" | tr -d '[:space:]')
    [ -n "$reason" ] || fuse_die "$1:$n: '$name' has no '# reason' comment"
    echo "$name"
  done <"$1"
}

# pjdfstest DIR [EXPECTED_FAILURES_FILE]: every test passes or is skipped, except the listed ones,
# which must fail. Without a file (the ext4 baseline) no failure is allowed.
part_pjdfstest() {
  local dir=$1 expected_file=${2:-} log="$FUSE_WORK/logs/pjdfstest.log" rc=0
  mkdir -p "$dir"
  chmod 0755 "$dir"
  # Colors off (not a terminal anyway); no backtraces: the panic message names the assertion.
  NO_COLOR=1 RUST_BACKTRACE=0 RUST_LIB_BACKTRACE=0 \
    "$PJDFSTEST" -c "$PJDFSTEST_CONF" -p "$dir" >"$log" 2>&1 || rc=$?
  sed -i 's/\x1b\[[0-9;]*m//g' "$log"
  if ! grep -q '^Summary: ' "$log" || [ "$rc" -gt 1 ]; then
    tail -n 40 "$log"
    echo "pjdfstest: FAILED: the runner stopped (status $rc) before its summary; log: $log"
    return 1
  fi
  # One result line per test: "NAME<spaces>ok|skipped|FAILED".
  local results="$FUSE_WORK/logs/pjdfstest.results"
  sed -nE 's/^([A-Za-z0-9_:]+) +(ok|skipped|FAILED)$/\1 \2/p' "$log" | sort >"$results"
  local passed skipped failed total
  passed=$(awk '$2 == "ok"' "$results" | wc -l)
  skipped=$(awk '$2 == "skipped"' "$results" | wc -l)
  failed=$(awk '$2 == "FAILED"' "$results" | wc -l)
  total=$(sed -nE 's/^Summary: .* ([0-9]+) total$/\1/p' "$log")
  if [ "$((passed + skipped + failed))" != "$total" ]; then
    echo "pjdfstest: FAILED: parsed $passed passed + $skipped skipped + $failed failed, summary says $total total"
    return 1
  fi
  local expected=() listed="$FUSE_WORK/logs/pjdfstest.listed"
  : >"$listed"
  [ -z "$expected_file" ] || fuse_expected_failures "$expected_file" >"$listed"
  mapfile -t expected <"$listed"
  local bad=0 name status
  # Failures that are not listed: print each with its message (the indented lines after it).
  while read -r name status; do
    [ "$status" = FAILED ] || continue
    if ! printf '%s\n' "${expected[@]+"${expected[@]}"}" | grep -qxF "$name"; then
      bad=$((bad + 1))
      echo "FAILED: $name"
      awk -v n="$name" '
        found && /^[^ \t]/ { exit }
        found { print "    " $0 }
        $1 == n && $NF == "FAILED" { found = 1 }' "$log"
    fi
  done <"$results"
  # Listed tests that did not fail: the list must stay honest.
  for name in ${expected[@]+"${expected[@]}"}; do
    status=$(awk -v n="$name" '$1 == n { print $2 }' "$results")
    if [ "$status" != FAILED ]; then
      bad=$((bad + 1))
      echo "LISTED BUT ${status:-NOT RUN}: $name (remove it from ${expected_file#"$FUSE_ROOT/"})"
    fi
  done
  echo "pjdfstest: $passed passed, $skipped skipped, $failed failed (expected failures: ${#expected[@]}) in $dir"
  if [ "$bad" -ne 0 ]; then
    echo "pjdfstest: FAILED: $bad unexpected results; full log: $log"
    return 1
  fi
}

# fsx DIR: the fixed seeds and TXVFS_FSX_SEED's (see above), FSX_OPS operations each.
part_fsx() {
  local dir=$1 seed random_seed="" total=0 runs=0 rc bad=()
  mkdir -p "$dir"
  case "${TXVFS_FSX_SEED:-}" in
    "") ;;
    random) random_seed=$(od -An -N8 -tu8 /dev/urandom | tr -d ' ') ;;
    *) random_seed=$TXVFS_FSX_SEED ;;
  esac
  [ -z "$random_seed" ] || echo "fsx: extra seed $random_seed (replay: TXVFS_FSX_SEED=$random_seed tests/fuse/run)"
  for seed in $FSX_FIXED_SEEDS $random_seed; do
    local log="$FUSE_WORK/logs/fsx.$seed.log" file="$dir/fsx.$seed"
    local art="$FUSE_WORK/artifacts/fsx.$seed"
    mkdir -p "$art"
    rc=0
    "$FSX" -f "$FSX_CONF" -N "$FSX_OPS" -S "$seed" -P "$art" "$file" >"$log" 2>&1 || rc=$?
    runs=$((runs + 1))
    if [ "$rc" -ne 0 ] || ! grep -q 'All operations completed A-OK!' "$log"; then
      tail -n 60 "$log"
      echo "fsx seed $seed: FAILED (status $rc); replay: $FSX -f $FSX_CONF -N $FSX_OPS -S $seed FILE;" \
        "log: $log; expected contents: $art"
      bad+=("$seed")
      continue
    fi
    rm -f "$file"
    total=$((total + FSX_OPS))
  done
  if [ ${#bad[@]} -ne 0 ]; then
    echo "fsx: FAILED: seeds ${bad[*]} ($((runs - ${#bad[@]})) of $runs seeds passed, $FSX_OPS operations each)"
    return 1
  fi
  echo "fsx: $total operations, $runs seeds ($FSX_FIXED_SEEDS${random_seed:+ $random_seed}), 0 mismatches"
}

# fallocate DIR: which fallocate modes work, with the data checked (posix_fallocate and punch
# hole are required, as fsx uses them; zero range is reported).
part_fallocate() {
  local dir=$1 f modes="" out
  mkdir -p "$dir"
  f="$dir/falloc"
  local ref="$FUSE_WORK/expect/falloc.ref"
  head -c 262144 /dev/urandom >"$ref"
  # posix_fallocate (mode 0): extends the size, keeps the data, the new part reads as zeros.
  cp "$ref" "$f"
  fallocate -o 200000 -l 200000 "$f" || { echo "fallocate: FAILED: posix_fallocate (mode 0)"; return 1; }
  [ "$(stat -c %s "$f")" = 400000 ] || { echo "fallocate: FAILED: size $(stat -c %s "$f") after mode 0, want 400000"; return 1; }
  cmp -n 262144 "$ref" "$f" >/dev/null || { echo "fallocate: FAILED: data changed by mode 0"; return 1; }
  cmp -i 262144:0 -n $((400000 - 262144)) "$f" /dev/zero >/dev/null || { echo "fallocate: FAILED: extension not zero"; return 1; }
  modes="posix_fallocate ok"
  # FALLOC_FL_KEEP_SIZE beyond the end: the size stays.
  fallocate -n -o 400000 -l 100000 "$f" || { echo "fallocate: FAILED: KEEP_SIZE"; return 1; }
  [ "$(stat -c %s "$f")" = 400000 ] || { echo "fallocate: FAILED: KEEP_SIZE changed the size to $(stat -c %s "$f")"; return 1; }
  modes+=", keep_size ok"
  # FALLOC_FL_PUNCH_HOLE|KEEP_SIZE across a block boundary (64 KiB blocks in txvfs).
  cp "$ref" "$f"
  fallocate -p -o 60000 -l 20000 "$f" || { echo "fallocate: FAILED: punch hole"; return 1; }
  [ "$(stat -c %s "$f")" = 262144 ] || { echo "fallocate: FAILED: punch hole changed the size"; return 1; }
  cmp -n 60000 "$ref" "$f" >/dev/null && cmp -i 60000:0 -n 20000 "$f" /dev/zero >/dev/null \
    && cmp -i 80000:80000 "$ref" "$f" >/dev/null \
    || { echo "fallocate: FAILED: wrong data after punch hole 60000+20000"; return 1; }
  modes+=", punch_hole ok"
  # FALLOC_FL_ZERO_RANGE: optional; when it succeeds the data must be right.
  cp "$ref" "$f"
  if out=$(fallocate -z -o 100000 -l 70000 "$f" 2>&1); then
    cmp -n 100000 "$ref" "$f" >/dev/null && cmp -i 100000:0 -n 70000 "$f" /dev/zero >/dev/null \
      && cmp -i 170000:170000 "$ref" "$f" >/dev/null \
      || { echo "fallocate: FAILED: wrong data after zero range"; return 1; }
    modes+=", zero_range ok"
  else
    modes+=", zero_range unsupported (${out##*: })"
  fi
  rm -f "$f"
  echo "fallocate: $modes"
}

# git DIR: a repository with a small tree, two branches, checkouts back and forth, fsck.
part_git() {
  local dir=$1
  export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
  rm -rf "$dir"
  mkdir -p "$dir"
  cd "$dir"
  git init -q -b main repo
  cd repo
  git config user.name "txvfs fuse test"
  git config user.email "fuse@txvfs.invalid"
  mkdir -p src/deep/er docs
  local i
  for i in $(seq 1 20); do printf 'line %s of file %s\n' $(seq 1 $((i * 10))) "$i" >"src/f$i.txt"; done
  printf '#!/bin/sh\necho hello\n' >run.sh
  chmod +x run.sh
  echo "readme v1" >README
  echo "deep" >src/deep/er/leaf.txt
  head -c 300000 /dev/urandom >docs/blob.bin      # several 64 KiB blocks
  ln -s src/f1.txt link-to-f1
  sha256sum docs/blob.bin | cut -d' ' -f1 >"$FUSE_WORK/expect/git.blob.sha256"
  git add .
  git commit -q -m "initial tree"
  git branch feature
  git checkout -q feature
  echo "readme v2 (feature)" >README
  git rm -q src/f3.txt
  echo "new on feature" >src/new.txt
  head -c 100000 /dev/urandom >docs/blob.bin
  sha256sum docs/blob.bin | cut -d' ' -f1 >"$FUSE_WORK/expect/git.blob2.sha256"
  git add -A
  git commit -q -m "feature: change README, remove f3, add new, replace blob"
  git checkout -q main
  # Back on main: the first tree, exactly.
  [ "$(cat README)" = "readme v1" ] || { echo "git: FAILED: README on main is '$(cat README)'"; return 1; }
  [ -f src/f3.txt ] && [ ! -e src/new.txt ] || { echo "git: FAILED: main's tree not restored (f3/new)"; return 1; }
  [ "$(sha256sum docs/blob.bin | cut -d' ' -f1)" = "$(cat "$FUSE_WORK/expect/git.blob.sha256")" ] \
    || { echo "git: FAILED: docs/blob.bin on main differs"; return 1; }
  [ -x run.sh ] && [ "$(readlink link-to-f1)" = src/f1.txt ] || { echo "git: FAILED: mode or symlink lost"; return 1; }
  [ -z "$(git status --porcelain)" ] || { git status --porcelain; echo "git: FAILED: status not clean on main"; return 1; }
  git checkout -q feature
  [ "$(cat README)" = "readme v2 (feature)" ] && [ ! -e src/f3.txt ] && [ "$(cat src/new.txt)" = "new on feature" ] \
    || { echo "git: FAILED: feature's tree wrong after checkout"; return 1; }
  [ "$(sha256sum docs/blob.bin | cut -d' ' -f1)" = "$(cat "$FUSE_WORK/expect/git.blob2.sha256")" ] \
    || { echo "git: FAILED: docs/blob.bin on feature differs"; return 1; }
  git checkout -q main
  git fsck --full --strict --no-progress 2>&1 | sed 's/^/  fsck: /'
  git fsck --full --strict --no-progress >/dev/null 2>&1 || { echo "git: FAILED: git fsck"; return 1; }
  git gc -q --prune=now   # packs and deletes loose objects: many renames and unlinks
  git fsck --full --strict --no-progress >/dev/null 2>&1 || { echo "git: FAILED: git fsck after gc"; return 1; }
  [ "$(git rev-list --count feature)" = 2 ] || { echo "git: FAILED: feature has $(git rev-list --count feature) commits"; return 1; }
  git rev-parse main feature >"$FUSE_WORK/expect/git.heads"
  echo "git: init, 2 commits on 2 branches, checkouts, fsck and gc ok"
}

# sqlite DIR: the sqlite3 shell (Debian's) with the default rollback journal.
part_sqlite() {
  local dir=$1 db out
  mkdir -p "$dir"
  db="$dir/app.db"
  rm -f "$db" "$db-journal"
  out=$(sqlite3 -batch -bail "$db" <<'SQL'
PRAGMA journal_mode;
CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT, b BLOB);
BEGIN;
INSERT INTO t(v, b) SELECT 'row' || value, randomblob(200) FROM generate_series(1, 20000);
COMMIT;
BEGIN;
UPDATE t SET v = upper(v) WHERE id % 2 = 0;
DELETE FROM t WHERE id > 15000;
COMMIT;
CREATE INDEX tv ON t(v);
BEGIN;
DELETE FROM t;
ROLLBACK;
SELECT count(*), sum(v GLOB 'ROW*'), sum(length(b)) FROM t;
PRAGMA integrity_check;
SQL
  ) || { echo "$out"; echo "sqlite: FAILED: sqlite3 exited non-zero"; return 1; }
  [ "$out" = $'delete\n15000|7500|3000000\nok' ] || { echo "$out"; echo "sqlite: FAILED: unexpected results"; return 1; }
  [ ! -e "$db-journal" ] || { echo "sqlite: FAILED: hot journal $db-journal left behind"; return 1; }
  # A second process sees the committed state.
  out=$(sqlite3 -batch -bail "$db" 'SELECT count(*), max(id) FROM t; PRAGMA integrity_check;') \
    || { echo "$out"; echo "sqlite: FAILED: reopen"; return 1; }
  [ "$out" = $'15000|15000\nok' ] || { echo "$out"; echo "sqlite: FAILED: reopen results"; return 1; }
  sqlite3 -batch "$db" "SELECT count(*), sum(v GLOB 'ROW*'), sum(length(b)) FROM t;" >"$FUSE_WORK/expect/sqlite.counts"
  echo "sqlite: 20000 rows inserted in one transaction, update/delete/index/rollback, integrity_check ok (journal_mode=delete)"
}

# marker DIR: files with known contents for the check after reopening the store.
part_marker() {
  local dir=$1
  mkdir -p "$dir/sub"
  head -c 1048699 /dev/urandom >"$dir/big"               # 16 blocks and a partial one
  echo "small inline file" >"$dir/small"
  ln -s ../big "$dir/sub/link"
  ln "$dir/small" "$dir/sub/hardlink"
  sha256sum <"$dir/big" | cut -d' ' -f1 >"$FUSE_WORK/expect/marker.big.sha256"
  [ "$(cat "$dir/sub/link" | sha256sum | cut -d' ' -f1)" = "$(cat "$FUSE_WORK/expect/marker.big.sha256")" ] \
    || { echo "marker: FAILED: reading big through the symlink differs"; return 1; }
  [ "$(stat -c %h "$dir/small")" = 2 ] || { echo "marker: FAILED: nlink of small is $(stat -c %h "$dir/small")"; return 1; }
  sync -f "$dir/big"
  echo "marker: big (1048699 B), small, symlink, hard link written"
}

# shared STORE DIR (DIR on the mount of STORE): the mount and other processes use the store at
# once (issue 15). The CLI (a client of the mount, which owns the store) sees what was written
# through the mount and the mount sees what the CLI put (a replaced file once the kernel's 1 s
# attribute cache has passed); a second mount of the same store (a client) reads and writes
# too, and fsck is clean with both mounted.
part_shared() {
  local store=$1 dir=$2 mnt2="$FUSE_WORK/mnt-shared" pid2 waited=0 out
  mkdir -p "$dir"
  echo one >"$dir/a"
  out=$("$TXVFS_BIN" cat --store "$store" /shared/a) && [ "$out" = one ] \
    || { echo "shared: FAILED: txvfs cat of a file written through the mount: '$out'"; return 1; }
  echo two | "$TXVFS_BIN" put --store "$store" - /shared/b
  [ "$(cat "$dir/b")" = two ] || { echo "shared: FAILED: the mount does not see a file the CLI put"; return 1; }
  echo three | "$TXVFS_BIN" put --store "$store" - /shared/a
  sleep 1.2
  [ "$(cat "$dir/a")" = three ] || { echo "shared: FAILED: the mount does not see a file the CLI replaced: '$(cat "$dir/a")'"; return 1; }
  mkdir -p "$mnt2"
  "$TXVFS_BIN" mount --store "$store" "$mnt2" >"$FUSE_WORK/logs/mount-shared.log" 2>&1 &
  pid2=$!
  while ! fuse_is_mounted "$mnt2"; do
    kill -0 "$pid2" 2>/dev/null && [ "$waited" -lt 300 ] \
      || { cat "$FUSE_WORK/logs/mount-shared.log"; echo "shared: FAILED: a second mount of the store did not come up"; return 1; }
    sleep 0.1
    waited=$((waited + 1))
  done
  local fail=""
  [ "$(cat "$mnt2/shared/a")" = three ] || fail="the second mount reads '$(cat "$mnt2/shared/a")' for /shared/a"
  echo four >"$mnt2/shared/c"
  [ -z "$fail" ] && [ "$(cat "$dir/c")" != four ] && fail="the first mount does not see a file written through the second"
  [ -z "$fail" ] && ! out=$("$TXVFS_BIN" fsck --store "$store" 2>&1) && fail="fsck with two mounts: $out"
  fusermount3 -u "$mnt2" || fusermount3 -u -z "$mnt2"
  wait "$pid2" || fail="${fail:-the second mount exited with status $?}"
  [ -z "$fail" ] || { echo "shared: FAILED: $fail"; return 1; }
  echo "shared: CLI and a second mount see the mount's commits and it sees theirs; fsck clean"
}

# reopen STORE: after the unmount, the CLI sees what was written through the mount; fsck clean.
part_reopen() {
  local store=$1 out host="$FUSE_WORK/reopen"
  rm -rf "$host"
  mkdir -p "$host"
  out=$("$TXVFS_BIN" fsck --store "$store" 2>&1) || { echo "$out"; echo "reopen: FAILED: txvfs fsck"; return 1; }
  echo "$out" | sed 's/^/  fsck: /'
  out=$("$TXVFS_BIN" ls --store "$store" /) || { echo "reopen: FAILED: txvfs ls /"; return 1; }
  local d
  for d in fsx git marker sqlite; do
    grep -qxF "$d" <<<"$out" || grep -qE "(^|[[:space:]/])$d/?$" <<<"$out" \
      || { echo "$out"; echo "reopen: FAILED: /$d missing from txvfs ls /"; return 1; }
  done
  [ "$("$TXVFS_BIN" cat --store "$store" /marker/big | sha256sum | cut -d' ' -f1)" = "$(cat "$FUSE_WORK/expect/marker.big.sha256")" ] \
    || { echo "reopen: FAILED: /marker/big differs"; return 1; }
  [ "$("$TXVFS_BIN" cat --store "$store" /marker/small)" = "small inline file" ] \
    || { echo "reopen: FAILED: /marker/small differs"; return 1; }
  [ "$("$TXVFS_BIN" cat --store "$store" /marker/sub/hardlink)" = "small inline file" ] \
    || { echo "reopen: FAILED: /marker/sub/hardlink differs"; return 1; }
  # The SQLite database, copied out, is intact and has the committed rows.
  "$TXVFS_BIN" get --store "$store" /sqlite/app.db "$host/app.db"
  out=$(sqlite3 -batch "$host/app.db" "PRAGMA integrity_check; SELECT count(*), sum(v GLOB 'ROW*'), sum(length(b)) FROM t;")
  [ "$out" = "ok"$'\n'"$(cat "$FUSE_WORK/expect/sqlite.counts")" ] \
    || { echo "$out"; echo "reopen: FAILED: /sqlite/app.db copied out: integrity or rows"; return 1; }
  # The git repository, exported, passes git fsck and has the same branch heads and contents.
  "$TXVFS_BIN" export --store "$store" /git/repo "$host/repo"
  export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
  git -c safe.directory='*' -C "$host/repo" fsck --full --strict --no-progress >/dev/null 2>&1 \
    || { echo "reopen: FAILED: git fsck on the exported repository"; return 1; }
  [ "$(git -c safe.directory='*' -C "$host/repo" rev-parse main feature)" = "$(cat "$FUSE_WORK/expect/git.heads")" ] \
    || { echo "reopen: FAILED: exported repository's branch heads differ"; return 1; }
  [ "$(git -c safe.directory='*' -C "$host/repo" show feature:README)" = "readme v2 (feature)" ] \
    || { echo "reopen: FAILED: feature:README in the exported repository"; return 1; }
  echo "reopen: txvfs fsck clean; marker files, SQLite database and git repository intact"
}

# The store packed into an image (`txvfs pack`) and the image mounted (`pack:` store): the
# marker files read back through the kernel, and a write fails with EROFS.
part_pack() {
  local store=$1 dir="$FUSE_WORK/pack" img
  rm -rf "$dir"
  mkdir -p "$dir"
  img="$dir/store.pack"
  "$TXVFS_BIN" pack "$store" "$img" || { echo "pack: FAILED: txvfs pack"; return 1; }
  fuse_mount "pack:$img" "$dir/mnt" "$dir/mount.log" || { echo "pack: FAILED: could not mount the image"; return 1; }
  local ok=1 err
  [ "$(sha256sum <"$dir/mnt/marker/big" | cut -d' ' -f1)" = "$(cat "$FUSE_WORK/expect/marker.big.sha256")" ] \
    || { echo "pack: /marker/big differs"; ok=0; }
  [ "$(cat "$dir/mnt/marker/sub/hardlink")" = "small inline file" ] || { echo "pack: /marker/sub/hardlink differs"; ok=0; }
  [ "$(stat -c %i "$dir/mnt/marker/small")" = "$(stat -c %i "$dir/mnt/marker/sub/hardlink")" ] \
    || { echo "pack: the hard link is two inodes"; ok=0; }
  if err=$(touch "$dir/mnt/marker/new" 2>&1); then
    echo "pack: a write to the image succeeded"; ok=0
  elif ! grep -q "Read-only file system" <<<"$err"; then
    echo "pack: a write failed but not with EROFS: $err"; ok=0
  fi
  fuse_unmount || ok=0
  [ "$ok" = 1 ] || { echo "pack: FAILED"; return 1; }
  echo "pack: ok (image $(stat -c %s "$img") bytes, mounted, marker files read back, writes refused with EROFS)"
}
