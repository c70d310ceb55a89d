//! libfuse's log, minus one warning it prints at every mount.

/// The message libfuse 3.14 logs at each mount because fuser hands it a newer (unused)
/// operations table: fuser uses libfuse only to mount and serves requests itself.
const TABLE_WARNING: &[u8] = b"fuse: warning: library too old";

extern "C" {
    fn fuse_set_log_func(func: extern "C" fn(libc::c_int, *const libc::c_char, *mut libc::c_void));
    fn vsnprintf(
        buf: *mut libc::c_char,
        size: libc::size_t,
        fmt: *const libc::c_char,
        ap: *mut libc::c_void,
    ) -> libc::c_int;
}

/// libfuse's logger, minus the operations-table warning: everything else goes to standard
/// error as libfuse would print it. `ap` is the `va_list` (a pointer on x86-64 and arm64).
extern "C" fn libfuse_log(_level: libc::c_int, fmt: *const libc::c_char, ap: *mut libc::c_void) {
    // SAFETY: libfuse passes a NUL-terminated format and its matching va_list.
    unsafe {
        if std::ffi::CStr::from_ptr(fmt).to_bytes().starts_with(TABLE_WARNING) {
            return;
        }
        let mut buf = [0 as libc::c_char; 1024];
        if vsnprintf(buf.as_mut_ptr(), buf.len(), fmt, ap) >= 0 {
            eprint!("{}", std::ffi::CStr::from_ptr(buf.as_ptr()).to_string_lossy());
        }
    }
}

/// Installs [`libfuse_log`] as libfuse's logger.
pub(crate) fn quiet_libfuse_table_warning() {
    // SAFETY: installs a logger with the signature libfuse expects (fuse_log_func_t).
    unsafe { fuse_set_log_func(libfuse_log) };
}
