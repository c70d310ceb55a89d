//! Stopping a mount: SIGINT and SIGTERM reach the serving loop through a pipe, and a busy
//! mount is detached (`umount -l`) rather than left mounted.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::Ordering;

/// Detaches a busy mount (`umount -l`): directly as root, else through fusermount3.
pub(crate) fn detach(target: &std::ffi::CStr) {
    // SAFETY: a valid C string naming the mount point.
    if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } == 0 {
        eprintln!(
            "txvfs mount: {} was busy: detached; serving its last users until they let go",
            target.to_string_lossy()
        );
        return;
    }
    let path = std::ffi::OsStr::from_bytes(target.to_bytes());
    match std::process::Command::new("fusermount3").arg("-u").arg("-z").arg(path).status() {
        Ok(s) if s.success() => {
            eprintln!(
                "txvfs mount: {} was busy: detached; serving its last users until they let go",
                path.to_string_lossy()
            )
        }
        _ => eprintln!(
            "txvfs mount: cannot unmount {}: {}",
            path.to_string_lossy(),
            io::Error::last_os_error()
        ),
    }
}

/// The write end of the pipe that SIGINT and SIGTERM write to.
static STOP_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn on_stop_signal(_: libc::c_int) {
    let fd = STOP_PIPE.load(Ordering::Relaxed);
    // SAFETY: write(2) is async-signal-safe; the byte is a static.
    unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
}

/// Makes SIGINT and SIGTERM write a byte to a pipe (whichever thread they hit: threads the
/// store started earlier have them unblocked), and returns the read end.
pub(crate) fn stop_on_signals() -> io::Result<libc::c_int> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    STOP_PIPE.store(fds[1], Ordering::Relaxed);
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a valid handler and an empty mask.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(sig, &action, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(fds[0])
}
