//! FoundationDB's network thread: selected and started once per process, stopped at exit.
//!
//! `fdb_run_network` runs on a thread of its own from the first `fdb:` open. At process exit
//! it must be stopped (`fdb_stop_network`) and joined before `libfdb_c`'s static destructors
//! run, or the still-running thread uses destroyed objects and the process dies with SIGSEGV.
//! `atexit` handlers and static destructors run together in reverse order of registration,
//! and `libfdb_c` registers destructors lazily: the network thread registers three when it
//! starts running, after `fdb_run_network` is called. So the stop hook is registered only once
//! the network thread has answered a request ([`register_stop_hook`], called by each open
//! after [`super::txn::ping`]), and again on every open: its last registration runs first.
//! The hook stops the network once and does nothing on its later runs.

use super::ffi::{self, Api};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;

static BOOT: OnceLock<Result<(), String>> = OnceLock::new();
static THREAD: Mutex<Option<JoinHandle<()>>> = Mutex::new(None);
static STOPPED: AtomicBool = AtomicBool::new(false);
/// False when another user of `libfdb_c` in this process (another copy of txvfs, such as the
/// SQLite extension loaded into a Python process that uses the Python binding, or
/// FoundationDB's own binding) had set up the network: it runs and stops it, not this copy.
static OWNER: AtomicBool = AtomicBool::new(false);

/// `api_version_already_set` and `network_already_setup`: another user of the library in
/// this process came first.
const API_VERSION_ALREADY_SET: i32 = 2201;
const NETWORK_ALREADY_SETUP: i32 = 2009;

/// The library with its network running, starting it on the first call in this process.
pub fn start() -> Result<&'static Api, String> {
    let api = ffi::api()?;
    BOOT.get_or_init(|| boot(api)).clone()?;
    if STOPPED.load(Ordering::Acquire) {
        return Err("FoundationDB's network thread was stopped (the process is exiting)".into());
    }
    Ok(api)
}

fn boot(api: &'static Api) -> Result<(), String> {
    // SAFETY: plain calls into the loaded library, once per process (BOOT).
    let e = unsafe { (api.fdb_select_api_version_impl)(ffi::API_VERSION, ffi::API_VERSION) };
    if e != 0 && e != API_VERSION_ALREADY_SET {
        // SAFETY: as above.
        let max = unsafe { (api.fdb_get_max_api_version)() };
        return Err(format!(
            "FoundationDB's client library does not support API version {} (it supports up \
             to {max}): {} (error {e}); install FoundationDB's client package 7.3 or newer",
            ffi::API_VERSION,
            api.message(e)
        ));
    }
    // SAFETY: as above.
    let e = unsafe { (api.fdb_setup_network)() };
    if e == NETWORK_ALREADY_SETUP {
        return Ok(()); // another user runs the network (see OWNER)
    }
    if e != 0 {
        return Err(format!(
            "cannot set up FoundationDB's network: {} (error {e})",
            api.message(e)
        ));
    }
    let thread = std::thread::Builder::new()
        .name("fdb-network".into())
        .spawn(move || {
            // SAFETY: fdb_setup_network succeeded; this is the one network thread.
            let e = unsafe { (api.fdb_run_network)() };
            if e != 0 {
                eprintln!("txvfs: FoundationDB's network thread failed: {}", api.message(e));
            }
        })
        .map_err(|e| format!("cannot start FoundationDB's network thread: {e}"))?;
    *THREAD.lock().unwrap_or_else(|p| p.into_inner()) = Some(thread);
    OWNER.store(true, Ordering::Release);
    Ok(())
}

/// True once the exit hook has stopped the network: the process is exiting, and no thread may
/// call into `libfdb_c` any more (its static destructors may be running), so transactions,
/// waits and destructions are refused or skipped from then on.
pub fn stopped() -> bool {
    STOPPED.load(Ordering::Acquire)
}

/// Registers [`stop_at_exit`] (again): see the module docs. Called once the network thread
/// has answered a request, so that its lazily registered destructors run after the hook.
pub fn register_stop_hook() {
    if !OWNER.load(Ordering::Acquire) {
        return;
    }
    // SAFETY: registers a plain extern "C" function that captures nothing.
    unsafe { libc::atexit(stop_at_exit) };
}

/// Stops and joins the network thread, once; later calls return at once.
extern "C" fn stop_at_exit() {
    if STOPPED.swap(true, Ordering::AcqRel) {
        return;
    }
    let Ok(api) = ffi::api() else { return };
    // The network may be stopped even while other threads wait on futures (they never
    // return; the process is exiting).
    // SAFETY: the network was set up (STOPPED is only reachable after start()).
    let e = unsafe { (api.fdb_stop_network)() };
    if e != 0 {
        return;
    }
    // try_lock: a thread that held the lock when exit began must not hang the exit.
    let handle = match THREAD.try_lock() {
        Ok(mut t) => t.take(),
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner().take(),
        Err(std::sync::TryLockError::WouldBlock) => None,
    };
    if let Some(handle) = handle {
        let _ = handle.join();
    }
}
