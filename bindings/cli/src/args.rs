//! The command line: the arguments and subcommands clap parses.

use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

/// The txvfs command-line tool: inspect and change a transactional virtual file system.
#[derive(Parser)]
#[command(name = "txvfs", version, about, propagate_version = true)]
pub struct Cli {
    /// The store: a RocksDB directory (`PATH` or `rocksdb:PATH`), `memory:` or `fdb:...`.
    #[arg(long, global = true, env = "TXVFS_STORE", value_name = "URI")]
    pub store: Option<String>,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum Command {
    /// Follow the change feed: one line per committed change (`CURSOR KIND PATH [-> TO]`, or
    /// JSON with `--json`), in commit order, at or below PATH. Turn the feed on first
    /// (`txvfs feed on`).
    Watch {
        /// Only changes at or below this path.
        path: Option<OsString>,
        /// Start after this cursor (a line's first field) instead of now.
        #[arg(long, value_name = "CURSOR")]
        since: Option<String>,
        /// One JSON object per line: `cursor`, `kind`, `path`, `to` (null without a
        /// destination), `ino`. A name that is not UTF-8 comes as `path_b64` (or `to_b64`), its
        /// bytes in base64 (RFC 4648), in place of `path` (or `to`).
        #[arg(long)]
        json: bool,
        /// Exit after printing this many changes.
        #[arg(long, value_name = "N")]
        count: Option<u64>,
        /// Exit once no change came for this many seconds.
        #[arg(long, value_name = "SECONDS")]
        idle: Option<f64>,
    },
    /// Turn the store's change feed on or off (off by default: it costs each writing
    /// transaction one more key). Writers read the setting when they open the store. `on`
    /// prints the feed's current cursor.
    Feed {
        /// `on` or `off`.
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
    /// Create a new store (fails if one exists already).
    Init {
        /// Bytes per data block: a power of two from 512 to 65536.
        #[arg(long, default_value_t = 65536)]
        block_size: u32,
        /// Files up to this many bytes keep their data in the inode (at most 65536).
        #[arg(long, default_value_t = 4096)]
        inline_limit: u32,
    },
    /// List a directory (or show one file).
    Ls {
        /// Long format: mode, links, owner, group, size, mtime, name.
        #[arg(short = 'l')]
        long: bool,
        /// Recurse into subdirectories.
        #[arg(short = 'R')]
        recursive: bool,
        /// Paths in the store (default `/`).
        paths: Vec<OsString>,
    },
    /// Print files to standard output.
    Cat {
        /// Paths in the store.
        #[arg(required = true)]
        paths: Vec<OsString>,
    },
    /// Copy one host file (or standard input with `-`) into the store, in one transaction.
    Put {
        /// Host file, or `-` for standard input.
        host: PathBuf,
        /// Destination path in the store.
        path: OsString,
    },
    /// Copy one file out of the store to a host file (or standard output with `-`).
    Get {
        /// Source path in the store.
        path: OsString,
        /// Host file, or `-` for standard output.
        host: PathBuf,
    },
    /// Copy a host directory tree into the store.
    Import {
        /// Host directory.
        host: PathBuf,
        /// Destination directory in the store (created if missing).
        path: OsString,
        /// Import everything in one transaction: all or nothing.
        #[arg(long)]
        atomic: bool,
        /// Entries per transaction without `--atomic`.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
        batch: u64,
    },
    /// Copy a store directory tree out to a host directory.
    Export {
        /// Source directory in the store.
        path: OsString,
        /// Host directory (created if missing).
        host: PathBuf,
    },
    /// Create directories.
    Mkdir {
        /// Create missing parents; no error if the directory exists.
        #[arg(short = 'p')]
        parents: bool,
        /// Permission bits, in octal.
        #[arg(short = 'm', default_value = "755", value_parser = parse_mode)]
        mode: u32,
        /// Paths in the store.
        #[arg(required = true)]
        paths: Vec<OsString>,
    },
    /// Remove files, symlinks and (with `-r`) directory trees.
    Rm {
        /// Remove directories and everything below them.
        #[arg(short = 'r', short_alias = 'R')]
        recursive: bool,
        /// Paths in the store.
        #[arg(required = true)]
        paths: Vec<OsString>,
    },
    /// Rename or move (into DST when DST is a directory).
    Mv {
        /// Source path.
        src: OsString,
        /// Destination path or directory.
        dst: OsString,
    },
    /// Copy inside the store (into DST when DST is a directory).
    Cp {
        /// Copy directories recursively.
        #[arg(short = 'r', short_alias = 'R')]
        recursive: bool,
        /// Source path.
        src: OsString,
        /// Destination path or directory.
        dst: OsString,
    },
    /// Make a hard link, or a symbolic link with `-s`.
    Ln {
        /// Make a symbolic link whose contents are TARGET.
        #[arg(short = 's')]
        symbolic: bool,
        /// Existing path (or symlink contents with `-s`).
        target: OsString,
        /// The new link.
        link: OsString,
    },
    /// Show attributes of files.
    Stat {
        /// Paths in the store.
        #[arg(required = true)]
        paths: Vec<OsString>,
    },
    /// Show a directory tree.
    Tree {
        /// Root of the tree (default `/`).
        path: Option<OsString>,
    },
    /// Show the bytes used by trees (apparent file sizes).
    Du {
        /// Print only the total of each argument, not every directory.
        #[arg(short = 's')]
        summary: bool,
        /// Paths in the store (default `/`).
        paths: Vec<OsString>,
    },
    /// Show store-wide usage.
    Df,
    /// Quotas on directory trees: limits on the bytes of regular files and on inodes, checked
    /// in every commit (a change that would pass one fails with EDQUOT).
    Quota {
        /// What to do.
        #[command(subcommand)]
        action: QuotaAction,
    },
    /// Build a read-only pack image from a store (read at one snapshot) or a host directory;
    /// open it with `--store pack:IMAGE`. Does not use `--store`.
    Pack {
        /// A store URI (`PATH`, `rocksdb:PATH`, `pack:IMAGE`, `fdb:...`) or a host directory.
        source: String,
        /// The image file to write (replaced atomically when the build completes).
        image: PathBuf,
        /// Treat SOURCE as a host directory even if it holds a store.
        #[arg(long)]
        host: bool,
        /// For a host directory: bytes per data block of the image.
        #[arg(long, default_value_t = 65536)]
        block_size: u32,
        /// For a host directory: files up to this many bytes keep their data in the inode.
        #[arg(long, default_value_t = 4096)]
        inline_limit: u32,
    },
    /// Check the store's on-disk invariants.
    Fsck {
        /// Fix what can be fixed safely, and print what was done.
        #[arg(long)]
        repair: bool,
    },
    /// Mount the store with FUSE and serve it until unmounted (`fusermount3 -u`) or
    /// interrupted (SIGINT/SIGTERM unmount cleanly).
    Mount {
        /// An existing directory to mount on.
        mountpoint: PathBuf,
        /// Mount read-only (the store is opened read-only).
        #[arg(long)]
        read_only: bool,
        /// Let other users use the mount (FUSE's allow_other).
        #[arg(long)]
        allow_other: bool,
        /// Seconds the kernel may cache attributes and names: how late changes made to the
        /// store outside this mount can show.
        #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
        cache_ttl: f64,
    },
    /// Named snapshots of the store: read-only views of the whole tree at one instant that
    /// survive reopening, opened by the URI `create` prints (`rocksdb:PATH?snapshot=NAME`).
    Snapshot {
        /// What to do.
        #[command(subcommand)]
        action: SnapshotAction,
    },
    /// Make UPPER (a new, empty store) a writable clone of the read-only store LOWER (a named
    /// snapshot, `rocksdb:PATH?snapshot=NAME`): reads fall through to LOWER, changes stay in
    /// UPPER, LOWER is never modified. Takes the same time whatever LOWER's size. Afterwards,
    /// `--store UPPER` opens the clone. Ignores `--store`.
    Clone {
        /// The read-only lower store's URI.
        lower: String,
        /// The new clone: a RocksDB directory that does not exist yet (or is empty).
        upper: String,
    },
}

/// What `txvfs quota` does.
#[derive(Subcommand)]
pub enum QuotaAction {
    /// Set or change the limits of the tree at directory PATH (a new quota counts what the
    /// tree holds already). Give at least one limit.
    Set {
        /// The tree's top directory.
        path: OsString,
        /// Most bytes of regular files in the tree.
        #[arg(long, value_name = "N")]
        bytes: Option<u64>,
        /// Most inodes in the tree (the top directory counts).
        #[arg(long, value_name = "N")]
        inodes: Option<u64>,
    },
    /// Show the limits and usage of the innermost quota tree PATH is in.
    Show {
        /// A path in the store.
        path: OsString,
    },
    /// Remove the quota of the tree whose top directory is PATH.
    Remove {
        /// The tree's top directory.
        path: OsString,
    },
}

/// What `txvfs snapshot` does.
#[derive(Subcommand)]
pub enum SnapshotAction {
    /// Snapshot the whole tree now under NAME (no data is copied) and print its URI.
    Create {
        /// 1 to 100 of `A-Z a-z 0-9 . _ -`, not starting with `.`.
        name: String,
    },
    /// Print the names of the store's snapshots, one per line, with their URIs.
    List,
    /// Delete a snapshot (refused while it is open, by a clone over it included).
    Delete {
        /// The snapshot's name.
        name: String,
    },
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| format!("{s:?} is not an octal mode"))
}
