//! How an open of a shared store finds its mode: the owner (the first process, which serves
//! the others through its socket and change ring) or a client of the owner.

use super::*;

/// The error when nobody served the store for `waited`: names the process holding it.
pub(super) fn not_served(dir: &Path, waited: Duration) -> Error {
    let pid = owner_info(dir).0;
    let mut e = waits::owner_stalled(
        &format!("rocksdb:{}", dir.display()),
        pid,
        Some(waited),
        waits::Outcome::NoChange,
    );
    if pid.is_some_and(|p| waits::proc_state(p) != waits::ProcState::Stopped) {
        e = busy(
            dir,
            format!(
                "process {} holds the store but does not serve it (waited {waited:?})",
                pid.unwrap_or(0)
            ),
        );
    }
    e
}

/// The first mode of a new open: owner, or client (waiting for an owner that is starting).
pub(super) fn first_mode(
    dir: &Path,
    exclusive: bool,
    sharing: &Arc<AloneState>,
    alive: &Arc<Mutex<Option<Alive>>>,
    timeout: Duration,
) -> Result<Mode> {
    let wait = timeout.max(RECOVERY_TIMEOUT);
    let deadline = Instant::now() + wait;
    loop {
        if let Some(m) = try_mode(dir, exclusive, sharing, alive, timeout)? {
            return Ok(m);
        }
        if Instant::now() >= deadline {
            return Err(not_served(dir, wait));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One attempt: become the owner, or connect to the owner. `Ok(None)`: try again shortly (the
/// owner is starting, or has just gone away). An owner that accepts the connection but does
/// not answer within `timeout` is an error (EBUSY, saying why).
pub(super) fn try_mode(
    dir: &Path,
    exclusive: bool,
    sharing: &Arc<AloneState>,
    alive: &Arc<Mutex<Option<Alive>>>,
    timeout: Duration,
) -> Result<Option<Mode>> {
    match RocksBackend::open_owned(dir, exclusive) {
        Ok(local) => {
            let (mut server, mut bell) = (None, None);
            if !exclusive {
                // Without a ring (it could not be made) clients still work, uncached; without
                // a bell, their watchers poll.
                let ring = start_ring(&local, sharing).ok();
                let (b, bell_fd) = bell::Bell::create().ok().unzip();
                match Server::start(dir, local.clone(), sharing.clone(), ring, bell_fd) {
                    Ok(s) => (server, bell) = (Some(s), b),
                    // The directory's file system cannot hold a Unix socket (some FUSE file
                    // systems): the store still opens, for this process alone, and others are
                    // told so at once.
                    Err(_) => local.mark_exclusive(),
                }
            }
            return Ok(Some(Mode::Owner { local, server, bell }));
        }
        Err(e) if e.kind() != ErrorKind::Busy => return Err(e),
        Err(_) => {
            let (pid, holder_exclusive) = owner_info(dir);
            if exclusive || holder_exclusive {
                let who =
                    pid.map(|p| format!("process {p}")).unwrap_or_else(|| "another process".into());
                let why = if exclusive {
                    format!("exclusive use asked, but the store is in use by {who}")
                } else {
                    format!("store is in exclusive use by {who}")
                };
                return Err(busy(dir, why));
            }
        }
    }
    match Client::connect(dir, timeout, &format!("rocksdb:{}", dir.display()), alive) {
        Ok(c) => Ok(Some(Mode::Client(c))),
        Err(ConnectError::NoServer) => Ok(None),
        Err(ConnectError::Failed(e)) => Err(e),
    }
}

/// Starts this owner's change ring and has every commit recorded in it (see `ring.rs`). The
/// snapshots kept for clients' BEGIN_AT are kept only once another process is here: a store
/// used by one process alone pays no snapshot per commit (old versions kept from compaction).
fn start_ring(
    local: &Arc<RocksBackend>,
    sharing: &AloneState,
) -> Result<Arc<Mutex<ring::RingWriter>>> {
    let mut hooks = sharing.hooks.lock();
    let keep = if sharing.alone.load(Ordering::SeqCst) {
        let weak = Arc::downgrade(local);
        hooks.push(Box::new(move || {
            if let Some(l) = weak.upgrade() {
                l.keep_snapshots(ring::KEPT_VERSIONS);
            }
        }));
        0
    } else {
        ring::KEPT_VERSIONS
    };
    // `hooks` stays locked until the observer is in, so sharing cannot begin in between.
    let mut out = None;
    local.observe_commits(keep, |version| {
        let ring = Arc::new(Mutex::new(ring::RingWriter::start(version)?));
        out = Some(ring.clone());
        Ok(Box::new(move |v, batch| ring.lock().record(v, batch)))
    })?;
    drop(hooks);
    Ok(out.expect("set by the observer's maker"))
}
