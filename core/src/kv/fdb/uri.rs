//! `fdb:` URIs and the key prefix of a store.

use crate::error::{Error, ErrorKind, Result};
use std::time::Duration;

/// The store prefix used when the URI names none.
pub const DEFAULT_PREFIX: &str = "default";

/// The deadline of every wait on the cluster when the URI names none (`timeout=SECONDS`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The parts of an `fdb:` URI.
#[derive(Debug, PartialEq, Eq)]
pub struct FdbUri {
    /// The cluster file; `None` selects FoundationDB's default (`$FDB_CLUSTER_FILE` or
    /// `/etc/foundationdb/fdb.cluster`).
    pub cluster_file: Option<String>,
    /// The store's name inside the cluster.
    pub prefix: String,
    /// How long any one FoundationDB transaction of the store may wait for the cluster
    /// (FoundationDB's transaction `timeout` option): then the call fails with `Busy`.
    pub timeout: Duration,
}

impl FdbUri {
    /// Parses `fdb:[CLUSTER-FILE][?prefix=NAME][&timeout=SECONDS]` (seconds: fractions
    /// allowed, more than 0, at most a day; the parameters in any order).
    pub fn parse(uri: &str) -> Result<FdbUri> {
        let bad = |why: &str| Error::new(ErrorKind::Invalid, format!("{uri}: {why}"));
        let rest = uri.strip_prefix("fdb:").ok_or_else(|| bad("not an fdb: URI"))?;
        let (cluster, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut prefix = DEFAULT_PREFIX.to_string();
        let mut timeout = DEFAULT_TIMEOUT;
        for param in query.split('&').filter(|p| !p.is_empty()) {
            match param.split_once('=') {
                Some(("prefix", name)) if !name.is_empty() && !name.contains('\0') => {
                    prefix = name.to_string()
                }
                Some(("prefix", _)) => return Err(bad("prefix must be a non-empty name")),
                Some(("timeout", v)) => match v.parse::<f64>() {
                    // At least a millisecond (FoundationDB's unit), at most a day.
                    Ok(s) if s.is_finite() && (0.001..=86_400.0).contains(&s) => {
                        timeout = Duration::from_secs_f64(s)
                    }
                    _ => {
                        return Err(bad(&format!(
                            "timeout must be a number of seconds (0.001 to 86400), not {v:?}"
                        )))
                    }
                },
                _ => {
                    return Err(bad(&format!(
                        "unknown parameter {param:?} (known: prefix, timeout)"
                    )))
                }
            }
        }
        if cluster.contains('\0') {
            return Err(bad("the cluster file name contains NUL"));
        }
        let cluster_file = (!cluster.is_empty()).then(|| cluster.to_string());
        Ok(FdbUri { cluster_file, prefix, timeout })
    }

    /// The key prefix of the store: the tuple `("txvfs", NAME)` in FoundationDB's tuple
    /// encoding, so that the stores `a` and `ab` never overlap and other tuple-layer tools
    /// can read it.
    pub fn key_prefix(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.prefix.len() + 10);
        for s in ["txvfs", self.prefix.as_str()] {
            out.push(0x02);
            for &b in s.as_bytes() {
                out.push(b);
                if b == 0 {
                    out.push(0xff);
                }
            }
            out.push(0x00);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris() {
        let u = FdbUri::parse("fdb:").unwrap();
        let default = DEFAULT_TIMEOUT;
        assert_eq!(
            u,
            FdbUri { cluster_file: None, prefix: DEFAULT_PREFIX.into(), timeout: default }
        );
        let u = FdbUri::parse("fdb:/etc/fdb.cluster?prefix=app").unwrap();
        let cluster_file = Some("/etc/fdb.cluster".into());
        assert_eq!(u, FdbUri { cluster_file, prefix: "app".into(), timeout: default });
        let u = FdbUri::parse("fdb:?timeout=2.5&prefix=app").unwrap();
        assert_eq!((u.prefix.as_str(), u.timeout), ("app", Duration::from_millis(2500)));
        for bad in [
            "fdb:?prefix=",
            "fdb:?color=red",
            "fdb:?prefix",
            "fdb:a\0b",
            "fdb:?timeout=0",
            "fdb:?timeout=-1",
            "fdb:?timeout=soon",
            "fdb:?timeout=inf",
        ] {
            assert_eq!(FdbUri::parse(bad).unwrap_err().kind(), ErrorKind::Invalid, "{bad}");
        }
    }

    #[test]
    fn prefixes_are_tuples_that_never_overlap() {
        let p = |name: &str| FdbUri::parse(&format!("fdb:?prefix={name}")).unwrap().key_prefix();
        assert_eq!(p("ab"), b"\x02txvfs\x00\x02ab\x00");
        assert!(!p("ab").starts_with(&p("a")));
    }
}
