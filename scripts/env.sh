# Shared settings for the project's scripts (sourced, not run).
# One target directory outside the clone and one profile (release) for everything, so RocksDB
# (compiled from source, ~29 CPU-minutes) is built once and reused by every crate and run.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/txvfs/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
