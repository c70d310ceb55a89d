//! The CLI's error: one message line and an exit code.

/// A failed command: what to print after `txvfs: ` and the errno to exit with (0 means 1).
#[derive(Debug)]
pub struct CliError {
    /// The message.
    pub msg: String,
    /// The errno (or txvfs code) behind it, 0 if none.
    pub code: i32,
}

/// Result of a command.
pub type CliResult<T = ()> = Result<T, CliError>;

impl CliError {
    /// A failure with a message and exit code 1.
    pub fn msg(msg: impl Into<String>) -> CliError {
        CliError { msg: msg.into(), code: 0 }
    }

    /// An I/O error on a host path.
    pub fn io(what: &std::path::Path, e: std::io::Error) -> CliError {
        CliError { msg: format!("{}: {e}", what.display()), code: e.raw_os_error().unwrap_or(0) }
    }

    /// The process exit code: the errno when it is one, else 1.
    pub fn exit_code(&self) -> i32 {
        if (1..=125).contains(&self.code) {
            self.code
        } else {
            1
        }
    }
}

impl From<txvfs::Error> for CliError {
    fn from(e: txvfs::Error) -> CliError {
        CliError { msg: e.to_string(), code: e.code() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_locks_and_snapshots_exit_with_eio() {
        // Issue 37: the core reports a lost lock or a snapshot lost with its owner as EIO (as
        // NFS reports lost locks); the CLI prints its message and exits 5, not 1.
        let kind = txvfs::ErrorKind::from_code(libc::EIO).expect("EIO is one of the core's kinds");
        let e = CliError::from(txvfs::Error::new(kind, "the snapshot is gone with it"));
        assert_eq!(e.exit_code(), libc::EIO);
        assert_eq!(e.msg, "the snapshot is gone with it");
    }
}
