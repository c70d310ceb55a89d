//! The one error type of the core: every variant maps to one POSIX errno or one txvfs code.

use std::fmt;

/// txvfs's own error codes, beyond POSIX errno values. Bindings return them negated.
pub mod code {
    /// A transaction conflicted with another one; retry it.
    pub const CONFLICT: i32 = 10001;
    /// A transaction is larger than the backend can commit.
    pub const TOO_LARGE: i32 = 10002;
    /// Stored data failed a consistency check.
    pub const CORRUPT: i32 = 10003;
    /// The backend failed or is unreachable.
    pub const BACKEND: i32 = 10004;
    /// A transaction ran longer than the backend allows; retry it.
    pub const TOO_OLD: i32 = 10005;
    /// A commit may or may not have taken effect (its fsync failed after it was applied, or
    /// the backend lost contact while committing); do not simply retry it.
    pub const COMMIT_UNKNOWN: i32 = 10006;
}

/// What went wrong, independent of the message.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// ENOENT: no such file or directory.
    NotFound,
    /// EEXIST: the file exists.
    Exists,
    /// ENOTDIR: a path component is not a directory.
    NotDir,
    /// EISDIR: the file is a directory.
    IsDir,
    /// ENOTEMPTY: the directory is not empty.
    NotEmpty,
    /// EXDEV: the operation would cross stores.
    CrossDevice,
    /// ELOOP: too many symbolic links.
    Loop,
    /// ENAMETOOLONG: a name or path is too long.
    NameTooLong,
    /// EBADF: bad, closed or wrong-mode file handle.
    BadHandle,
    /// EACCES: permission denied by mode bits.
    Access,
    /// EPERM: operation not permitted (ownership).
    NotPermitted,
    /// EINVAL: invalid argument.
    Invalid,
    /// ENOSPC: the backend is full.
    NoSpace,
    /// EROFS: the store is read-only.
    ReadOnly,
    /// EBUSY: the resource is in use (the root, a locked store).
    Busy,
    /// EAGAIN/EWOULDBLOCK: a lock is held by another handle.
    WouldBlock,
    /// ENODATA: no such extended attribute.
    NoData,
    /// ERANGE: a buffer is too small.
    Range,
    /// EFBIG: the file would exceed the maximum size.
    FileTooBig,
    /// E2BIG: an argument (xattr value) is too big.
    TooBig,
    /// EDEADLK: waiting for the lock would deadlock.
    Deadlock,
    /// EDQUOT: the change would take a quota tree past its byte or inode limit (the message
    /// names the tree); nothing was changed.
    QuotaExceeded,
    /// EIO: what the call needs is out of reach for good: a handle whose locks were lost
    /// (their lease ran out while this process could not renew it; NFS reports lost locks
    /// the same way), a snapshot whose owner process went away.
    Io,
    /// txvfs: conflicting concurrent transaction; retryable.
    Conflict,
    /// txvfs: the transaction ran too long for the backend; retryable.
    TooOld,
    /// txvfs: the transaction exceeds the backend's size limits.
    TooLarge,
    /// txvfs: stored data is corrupt.
    Corrupt,
    /// txvfs: backend failure.
    Backend,
    /// txvfs: the commit's outcome is unknown (applied, but its fsync failed; or the backend
    /// lost contact mid-commit). Not retryable: a retry could apply it twice.
    CommitUnknown,
}

impl ErrorKind {
    /// The positive errno (POSIX) or txvfs code (see [`code`]) of this kind.
    pub fn code(self) -> i32 {
        use ErrorKind::*;
        match self {
            NotFound => libc::ENOENT,
            Exists => libc::EEXIST,
            NotDir => libc::ENOTDIR,
            IsDir => libc::EISDIR,
            NotEmpty => libc::ENOTEMPTY,
            CrossDevice => libc::EXDEV,
            Loop => libc::ELOOP,
            NameTooLong => libc::ENAMETOOLONG,
            BadHandle => libc::EBADF,
            Access => libc::EACCES,
            NotPermitted => libc::EPERM,
            Invalid => libc::EINVAL,
            NoSpace => libc::ENOSPC,
            ReadOnly => libc::EROFS,
            Busy => libc::EBUSY,
            WouldBlock => libc::EAGAIN,
            NoData => libc::ENODATA,
            Range => libc::ERANGE,
            FileTooBig => libc::EFBIG,
            TooBig => libc::E2BIG,
            Deadlock => libc::EDEADLK,
            QuotaExceeded => libc::EDQUOT,
            Io => libc::EIO,
            Conflict => code::CONFLICT,
            TooOld => code::TOO_OLD,
            TooLarge => code::TOO_LARGE,
            Corrupt => code::CORRUPT,
            Backend => code::BACKEND,
            CommitUnknown => code::COMMIT_UNKNOWN,
        }
    }

    /// The kind for a positive code, if it is one txvfs produces.
    pub fn from_code(c: i32) -> Option<ErrorKind> {
        ALL_KINDS.iter().copied().find(|k| k.code() == c)
    }

    /// A fixed description of the kind (what `strerror` gives).
    pub fn description(self) -> &'static str {
        use ErrorKind::*;
        match self {
            NotFound => "no such file or directory",
            Exists => "file exists",
            NotDir => "not a directory",
            IsDir => "is a directory",
            NotEmpty => "directory not empty",
            CrossDevice => "cross-store link or rename",
            Loop => "too many levels of symbolic links",
            NameTooLong => "file name too long",
            BadHandle => "bad file handle",
            Access => "permission denied",
            NotPermitted => "operation not permitted",
            Invalid => "invalid argument",
            NoSpace => "no space left on backend",
            ReadOnly => "read-only store",
            Busy => "resource busy",
            WouldBlock => "lock held by another handle",
            NoData => "no such attribute",
            Range => "result too large for buffer",
            FileTooBig => "file too large",
            TooBig => "argument too big",
            Deadlock => "lock wait would deadlock",
            QuotaExceeded => "disk quota exceeded",
            Io => "input/output error",
            Conflict => "transaction conflict (retryable)",
            TooOld => "transaction too old (retryable)",
            TooLarge => "transaction too large for the backend",
            Corrupt => "corrupt data in store",
            Backend => "backend failure",
            CommitUnknown => "commit outcome unknown",
        }
    }
}

const ALL_KINDS: &[ErrorKind] = {
    use ErrorKind::*;
    &[
        NotFound,
        Exists,
        NotDir,
        IsDir,
        NotEmpty,
        CrossDevice,
        Loop,
        NameTooLong,
        BadHandle,
        Access,
        NotPermitted,
        Invalid,
        NoSpace,
        ReadOnly,
        Busy,
        WouldBlock,
        NoData,
        Range,
        FileTooBig,
        TooBig,
        Deadlock,
        QuotaExceeded,
        Io,
        Conflict,
        TooOld,
        TooLarge,
        Corrupt,
        Backend,
        CommitUnknown,
    ]
};

/// An error: a kind and a message that names what failed (usually the path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

/// The result type of the whole core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind` with a message.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, message: message.into() }
    }

    /// An error of `kind` about `path`: the message reads "`path`: description".
    pub fn at(kind: ErrorKind, path: &[u8]) -> Error {
        Error::new(kind, format!("{}: {}", String::from_utf8_lossy(path), kind.description()))
    }

    /// The kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The positive errno or txvfs code.
    pub fn code(&self) -> i32 {
        self.kind.code()
    }

    /// True for errors that go away by retrying the whole transaction.
    pub fn is_retryable(&self) -> bool {
        matches!(self.kind, ErrorKind::Conflict | ErrorKind::TooOld)
    }
}

impl Error {
    /// An error of the host file system at `path`, with the path in the message: its errno's
    /// kind where txvfs has one (ENOENT, EACCES, ENOSPC), else [`ErrorKind::Backend`].
    pub(crate) fn host_io(path: &std::path::Path, e: std::io::Error) -> Error {
        let kind = match e.kind() {
            std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            std::io::ErrorKind::PermissionDenied => ErrorKind::Access,
            _ if e.raw_os_error() == Some(libc::ENOSPC) => ErrorKind::NoSpace,
            _ => ErrorKind::Backend,
        };
        Error::new(kind, format!("{}: {e}", path.display()))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        let code = e.code();
        let kind = if code < 10000 {
            std::io::Error::from_raw_os_error(code).kind()
        } else {
            std::io::ErrorKind::Other
        };
        std::io::Error::new(kind, e)
    }
}

/// The error a caught panic becomes at every panic boundary (the core's transactions, the C
/// ABI, Python, SQLite): one wording, "internal error (panic in txvfs): MESSAGE".
pub fn panic_error(payload: &(dyn std::any::Any + Send)) -> Error {
    Error::new(
        ErrorKind::Backend,
        format!("internal error (panic in txvfs): {}", panic_message(payload)),
    )
}

/// The message of a caught panic (the payload of `std::panic::catch_unwind`): the text
/// given to `panic!` when it is a string, else "unknown panic".
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for k in ALL_KINDS {
            assert!(seen.insert(k.code()), "duplicate code for {k:?}");
            assert_eq!(ErrorKind::from_code(k.code()), Some(*k));
        }
        assert_eq!(ErrorKind::NotFound.code(), 2);
    }

    #[test]
    fn panic_message_reads_str_and_string_payloads() {
        let caught = |f: fn()| std::panic::catch_unwind(f).unwrap_err();
        let literal = caught(|| panic!("literal"));
        let formatted = caught(|| panic!("formatted {}", 42));
        let other = caught(|| std::panic::panic_any(7u32));
        assert_eq!(panic_message(&*literal), "literal");
        assert_eq!(panic_message(&*formatted), "formatted 42");
        assert_eq!(panic_message(&*other), "unknown panic");
    }
}
