//! The panic boundary, error reporting and argument checks shared by every exported function.
//!
//! Every exported function runs its body through [`boundary`]: a result becomes 0 or a
//! negative code, a failure records its message for `txvfs_last_error()`, and a panic becomes
//! `-TXVFS_EPANIC` instead of unwinding into C.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use txvfs::{Error, ErrorKind};

/// txvfs's own error code: a transaction conflicted with another one; retry it.
pub const TXVFS_ECONFLICT: c_int = 10001;
/// txvfs's own error code: a transaction is larger than the backend can commit.
pub const TXVFS_ETOOLARGE: c_int = 10002;
/// txvfs's own error code: stored data failed a consistency check.
pub const TXVFS_ECORRUPT: c_int = 10003;
/// txvfs's own error code: the backend failed or is unreachable.
pub const TXVFS_EBACKEND: c_int = 10004;
/// txvfs's own error code: a transaction ran longer than the backend allows; retry it.
pub const TXVFS_ETOOOLD: c_int = 10005;
/// txvfs's own error code: the commit's outcome is unknown: it was applied, but its fsync
/// failed (the store then refuses every transaction until it is reopened), or the backend
/// lost contact while committing. Not retried: a retry could apply it twice.
pub const TXVFS_ECOMMIT_UNKNOWN: c_int = 10006;
/// txvfs's own error code: an internal error (a panic) was caught at the C boundary. The
/// library stays usable; the message names the function.
pub const TXVFS_EPANIC: c_int = 10100;

// The C codes are the core's codes; a mismatch fails the build.
const _: () = {
    assert!(TXVFS_ECONFLICT == txvfs::error::code::CONFLICT);
    assert!(TXVFS_ETOOLARGE == txvfs::error::code::TOO_LARGE);
    assert!(TXVFS_ECORRUPT == txvfs::error::code::CORRUPT);
    assert!(TXVFS_EBACKEND == txvfs::error::code::BACKEND);
    assert!(TXVFS_ETOOOLD == txvfs::error::code::TOO_OLD);
    assert!(TXVFS_ECOMMIT_UNKNOWN == txvfs::error::code::COMMIT_UNKNOWN);
};

/// A failure on its way to C: a positive code (errno or `TXVFS_E...`) and a message.
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) code: c_int,
    pub(crate) message: String,
}

impl Fail {
    pub(crate) fn new(code: c_int, message: impl Into<String>) -> Fail {
        Fail { code, message: message.into() }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Fail {
        Fail::new(libc::EINVAL, message)
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail { code: e.code(), message: e.message().to_string() }
    }
}

pub(crate) type R<T = ()> = Result<T, Fail>;

/// Room for the longest message: a function name, two 4096-byte paths and some words.
const LAST_ERROR_CAP: usize = 9216;

thread_local! {
    /// The thread's last message, NUL-terminated, in a buffer that never moves or shrinks: a
    /// pointer from `txvfs_last_error` stays valid (its text may change) until the thread ends.
    static LAST_ERROR: RefCell<[u8; LAST_ERROR_CAP]> = const { RefCell::new([0; LAST_ERROR_CAP]) };
}

fn set_last_error(message: &str) {
    // A thread being torn down has no slot any more; there is nobody left to read it then.
    let _ = LAST_ERROR.try_with(|l| {
        let mut buf = l.borrow_mut();
        let mut n = 0;
        for b in message.bytes().take(LAST_ERROR_CAP - 1) {
            buf[n] = if b == 0 { b'?' } else { b };
            n += 1;
        }
        buf[n] = 0;
    });
}

/// Runs `f` inside the panic boundary of the exported function `name`: `Ok` gives 0, an error
/// its negated code (message kept for `txvfs_last_error`), a panic `-TXVFS_EPANIC`.
pub(crate) fn boundary(name: &str, f: impl FnOnce() -> R) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(fail)) => {
            // An empty message passes on a code whose message is already set (a callback's).
            if !fail.message.is_empty() {
                set_last_error(&format!("{name}: {}", fail.message));
            }
            fail.code.wrapping_neg()
        }
        Err(panic) => {
            let e = txvfs::error::panic_error(&*panic);
            set_last_error(&format!("{name}: {}", e.message()));
            -TXVFS_EPANIC
        }
    }
}

/// The panic boundary for functions that cannot report an error (`_free`, getters of static
/// strings): a panic gives `fallback`.
pub(crate) fn boundary_or<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// Returns the message of the last failed call on this thread: the function's name, then
/// what failed (usually naming the path). Never NULL: an empty string before any failure.
/// Successful calls leave it unchanged.
///
/// Ownership: the string belongs to the library. The pointer stays valid as long as the
/// thread lives, but the next failing call on the thread overwrites the text: copy it to keep
/// it. Messages longer than 9215 bytes are cut.
#[no_mangle]
pub extern "C" fn txvfs_last_error() -> *const c_char {
    boundary_or(c"".as_ptr(), || {
        LAST_ERROR.try_with(|l| l.borrow().as_ptr().cast()).unwrap_or(c"".as_ptr())
    })
}

/// Returns a fixed description of an error code, negative (as functions return it) or
/// positive: the txvfs description for the codes txvfs produces, "success" for 0, and
/// "unknown error" otherwise. Never NULL.
///
/// Ownership: a static string; do not free it.
#[no_mangle]
pub extern "C" fn txvfs_strerror(code: c_int) -> *const c_char {
    boundary_or(c"unknown error".as_ptr(), || {
        let c = code.checked_abs().unwrap_or(0);
        let s: &'static CStr = match c {
            0 if code == 0 => c"success",
            TXVFS_EPANIC => c"internal error (panic) in txvfs",
            libc::EMFILE => c"too many open files in this store",
            libc::EOPNOTSUPP => c"operation not supported",
            _ => match ErrorKind::from_code(c) {
                Some(k) => static_description(k),
                None => c"unknown error",
            },
        };
        s.as_ptr()
    })
}

/// The core's description as a static C string. The table is built once from every code the
/// core produces (errno values are below 4096, txvfs's own codes from 10001) and lives for the
/// whole process.
fn static_description(kind: ErrorKind) -> &'static CStr {
    use std::sync::OnceLock;
    static TABLE: OnceLock<Vec<(i32, CString)>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        (1..4096)
            .chain(10001..10100)
            .filter_map(|c| {
                ErrorKind::from_code(c)
                    .map(|k| (c, CString::new(k.description()).unwrap_or_default()))
            })
            .collect()
    });
    table
        .iter()
        .find(|(c, _)| *c == kind.code())
        .map(|(_, s)| s.as_c_str())
        .unwrap_or(c"unknown error")
}

fn null(what: &str) -> Fail {
    Fail::invalid(format!("argument `{what}` is NULL"))
}

/// A NUL-terminated string argument as bytes.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn cstr<'a>(p: *const c_char, what: &str) -> R<&'a [u8]> {
    if p.is_null() {
        return Err(null(what));
    }
    Ok(CStr::from_ptr(p).to_bytes())
}

/// A shared reference to an object the caller passed.
///
/// # Safety
/// `p` is NULL or points to a live `T`.
pub(crate) unsafe fn obj<'a, T>(p: *const T, what: &str) -> R<&'a T> {
    p.as_ref().ok_or_else(|| null(what))
}

/// A mutable reference to an object the caller passed.
///
/// # Safety
/// `p` is NULL or points to a live `T` that no other thread uses meanwhile.
pub(crate) unsafe fn obj_mut<'a, T>(p: *mut T, what: &str) -> R<&'a mut T> {
    p.as_mut().ok_or_else(|| null(what))
}

/// An input buffer; NULL is allowed when `len` is 0.
///
/// # Safety
/// `p` is NULL or points to `len` readable bytes that outlive `'a`.
pub(crate) unsafe fn bytes<'a>(p: *const c_void, len: usize, what: &str) -> R<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(null(what));
    }
    Ok(std::slice::from_raw_parts(p.cast(), len))
}

/// An output buffer; NULL is allowed when `len` is 0.
///
/// # Safety
/// `p` is NULL or points to `len` writable bytes that outlive `'a` and nothing else uses.
pub(crate) unsafe fn bytes_mut<'a>(p: *mut c_void, len: usize, what: &str) -> R<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(null(what));
    }
    Ok(std::slice::from_raw_parts_mut(p.cast(), len))
}

/// An out-parameter, checked up front and written only when the call succeeds.
pub(crate) struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// # Safety
    /// `p` is NULL or points to writable memory for a `T`.
    pub(crate) unsafe fn new(p: *mut T, what: &str) -> R<Out<T>> {
        NonNull::new(p).map(Out).ok_or_else(|| null(what))
    }

    pub(crate) fn set(self, v: T) {
        // SAFETY: checked non-NULL in `new`; the caller promised it is writable. `write`
        // does not drop the old value, which may be uninitialized.
        unsafe { self.0.as_ptr().write(v) }
    }
}

/// Copies `data` into a caller buffer of `cap` bytes, the size-query convention shared by
/// every call that returns variable-length bytes: `buf` NULL with `cap` 0 asks for the size;
/// a buffer shorter than `data.len() + extra` fails with ERANGE. `extra` is 1 when a NUL
/// terminator follows the data.
///
/// # Safety
/// As [`bytes_mut`].
pub(crate) unsafe fn fill(
    buf: *mut c_void,
    cap: usize,
    data: &[u8],
    nul: bool,
    out_n: Out<usize>,
) -> R {
    if buf.is_null() && cap == 0 {
        out_n.set(data.len());
        return Ok(());
    }
    let need = data.len() + nul as usize;
    let dst = bytes_mut(buf, cap, "buf")?;
    if dst.len() < need {
        return Err(Fail::new(
            libc::ERANGE,
            format!("buffer of {cap} bytes is too small: {need} needed"),
        ));
    }
    dst[..data.len()].copy_from_slice(data);
    if nul {
        dst[data.len()] = 0;
    }
    out_n.set(data.len());
    Ok(())
}
