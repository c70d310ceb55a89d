//! Mounts a txvfs store as a Linux file system through FUSE (the `fuser` crate over
//! libfuse3), so that any program can use it: `txvfs mount --store URI MOUNTPOINT`.
//!
//! Every request becomes one core call on the store's inode-addressed API
//! ([`InodeFileSystem`]), each its own transaction, made with the credential of the calling
//! process (uid, gid and supplementary groups), so the core does every permission check.
//! The kernel caches attributes and entries for [`MountOptions::ttl`]: changes made through
//! the mount are always seen at once (the kernel invalidates what its own requests change);
//! changes made to the store by other processes, outside this mount, show up within the ttl.
//! POSIX record locks (`fcntl` F_SETLK, F_SETLKW, F_GETLK) go to the store's lock table, so
//! they also exclude programs using the library on the same store (and, on a shared backend,
//! other processes). `flock` locks stay in the kernel, for this mount only: FUSE does not
//! tell the two apart in the requests fuser passes on.

#![warn(missing_docs)]

mod adapter;
mod convert;
mod libfuse_log;
mod requests;
mod signals;

use adapter::Adapter;
use fuser::{Config, MountOption, Session, SessionACL};
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::time::Duration;
use txvfs::Store;

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// Mount read-only (the store is opened read-only too).
    pub read_only: bool,
    /// Let users other than the one who mounted use the mount (FUSE's `allow_other`; for a
    /// non-root user it needs `user_allow_other` in /etc/fuse.conf).
    pub allow_other: bool,
    /// How long the kernel may cache attributes and names (see the crate documentation).
    pub ttl: Duration,
    /// Threads serving requests.
    pub threads: usize,
}

impl Default for MountOptions {
    fn default() -> MountOptions {
        MountOptions {
            read_only: false,
            allow_other: false,
            ttl: Duration::from_secs(1),
            threads: 4,
        }
    }
}

/// Mounts `store` on `mountpoint` and serves it until the file system is unmounted
/// (`fusermount3 -u`, `umount`) or the process gets SIGINT or SIGTERM, which unmount it
/// cleanly. A mount still in use (an open file, a working directory) is detached instead,
/// like `umount -l`: it leaves the tree at once, and its users keep working until the last
/// lets go, when this returns. Returns once unmounted, after syncing the store.
pub fn mount(store: Store, mountpoint: &Path, options: &MountOptions) -> io::Result<()> {
    let sync_store = store.clone();
    let target =
        std::ffi::CString::new(std::fs::canonicalize(mountpoint)?.into_os_string().into_vec())?;
    let mut session = new_session(store, mountpoint, options)?;
    let mut unmounter = session.unmount_callable();
    let stop = signals::stop_on_signals()?;
    std::thread::Builder::new().name("txvfs-signals".into()).spawn(move || {
        let mut byte = [0u8; 1];
        let mut first = true;
        // SAFETY: reads one byte into a local buffer from the pipe the handler writes.
        while unsafe { libc::read(stop, byte.as_mut_ptr().cast(), 1) } == 1 {
            if std::mem::take(&mut first) && unmounter.unmount().is_ok() {
                continue;
            }
            signals::detach(&target);
        }
    })?;
    let served = session.run();
    let synced = sync_store.sync().map_err(io::Error::other);
    served.and(synced)
}

/// Mounts `store` on `mountpoint` in a background thread; dropping the returned session
/// unmounts it. For tests and programs that serve a mount next to other work.
pub fn spawn_mount(
    store: Store,
    mountpoint: &Path,
    options: &MountOptions,
) -> io::Result<fuser::BackgroundSession> {
    new_session(store, mountpoint, options)?.spawn()
}

/// A session serving `store` on `mountpoint` (not yet running).
fn new_session(
    store: Store,
    mountpoint: &Path,
    options: &MountOptions,
) -> io::Result<Session<Adapter>> {
    libfuse_log::quiet_libfuse_table_warning();
    Session::new(Adapter::new(store, options), mountpoint, &config(options))
}

/// fuser's configuration for `options`: mount options, ACL and threads.
fn config(options: &MountOptions) -> Config {
    let mut c = Config::default();
    c.mount_options = vec![
        MountOption::FSName("txvfs".into()),
        MountOption::Subtype("txvfs".into()),
        // Device nodes and set-user-id bits are stored, but honoured by the kernel only if
        // asked: as on most user mounts, they are not.
        MountOption::NoDev,
        MountOption::NoSuid,
        if options.read_only { MountOption::RO } else { MountOption::RW },
    ];
    if options.allow_other {
        // fuser passes `allow_other` to the mount for this ACL.
        c.acl = SessionACL::All;
    }
    c.n_threads = Some(options.threads.max(1));
    c
}
