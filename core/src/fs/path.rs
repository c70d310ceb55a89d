//! Path and name validation.

use crate::error::{Error, ErrorKind, Result};

/// Longest name of one directory entry, in bytes.
pub const NAME_MAX: usize = 255;
/// Longest path, in bytes.
pub const PATH_MAX: usize = 4096;
/// Most symbolic links followed while resolving one path.
pub const SYMLINK_MAX: usize = 40;

/// Splits an absolute path into its components, checking its length and bytes. Returns the
/// components and whether the path ended with a slash.
pub(crate) fn split(path: &[u8]) -> Result<(Vec<&[u8]>, bool)> {
    if path.is_empty() {
        return Err(Error::new(ErrorKind::NotFound, "empty path"));
    }
    if path.len() > PATH_MAX {
        return Err(Error::new(
            ErrorKind::NameTooLong,
            format!("path of {} bytes is longer than {PATH_MAX}", path.len()),
        ));
    }
    if path.contains(&0) {
        return Err(Error::new(ErrorKind::Invalid, format!("{}: path contains NUL", show(path))));
    }
    if path[0] != b'/' {
        return Err(Error::new(
            ErrorKind::Invalid,
            format!("{}: path must be absolute (start with '/')", show(path)),
        ));
    }
    let comps: Vec<&[u8]> = path.split(|&b| b == b'/').filter(|c| !c.is_empty()).collect();
    for c in &comps {
        check_len(c, path)?;
    }
    Ok((comps, path.len() > 1 && path.ends_with(b"/")))
}

fn check_len(name: &[u8], path: &[u8]) -> Result<()> {
    if name.len() > NAME_MAX {
        return Err(Error::new(
            ErrorKind::NameTooLong,
            format!("{}: a name is longer than {NAME_MAX} bytes", show(path)),
        ));
    }
    Ok(())
}

/// Checks a single entry name (no `/`, no NUL, not empty, `.` or `..`, at most 255 bytes).
pub fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name == b"." || name == b".." {
        return Err(Error::new(ErrorKind::Invalid, format!("invalid name {:?}", show(name))));
    }
    if name.contains(&b'/') || name.contains(&0) {
        return Err(Error::new(
            ErrorKind::Invalid,
            format!("{}: a name may not contain '/' or NUL", show(name)),
        ));
    }
    check_len(name, name)
}

/// A path for messages (lossy UTF-8).
pub(crate) fn show(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_checks_paths() {
        assert_eq!(split(b"/a//b/").unwrap(), (vec![&b"a"[..], b"b"], true));
        assert_eq!(split(b"/").unwrap(), (vec![], false));
        assert_eq!(split(b"").unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(split(b"a/b").unwrap_err().kind(), ErrorKind::Invalid);
        assert_eq!(split(b"/a\0b").unwrap_err().kind(), ErrorKind::Invalid);
        let long = [b"/".to_vec(), vec![b'x'; 256]].concat();
        assert_eq!(split(&long).unwrap_err().kind(), ErrorKind::NameTooLong);
        assert_eq!(split(&vec![b'/'; 4097]).unwrap_err().kind(), ErrorKind::NameTooLong);
        assert!(check_name(b"a/b").is_err());
        assert!(check_name(b"..").is_err());
        assert!(check_name(b"ok").is_ok());
    }
}
