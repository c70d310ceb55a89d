//! [`Name`]: a directory entry's name, kept inline when short.
//!
//! A listing returns one name per entry. As a `Vec<u8>` each was a heap allocation, and a
//! listing of 100,000 entries spent three quarters of its time in the allocator (allocating
//! the names, then freeing them and consolidating the freed chunks). Names up to
//! [`INLINE`] bytes (nearly all) now live inside the entry; longer ones are one boxed slice.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// The longest name kept inline (the entry stays 32 bytes).
const INLINE: usize = 30;

/// A directory entry's name: bytes, not necessarily UTF-8. It reads as a `&[u8]` (through
/// `Deref`), compares with byte slices, arrays, vectors and strings, and becomes a `Vec<u8>`
/// with [`Name::into_vec`] or `Vec::from`.
#[derive(Clone)]
pub struct Name(Repr);

#[derive(Clone)]
enum Repr {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl Name {
    /// A name holding a copy of `bytes`.
    pub fn new(bytes: &[u8]) -> Name {
        if bytes.len() <= INLINE {
            let mut inline = [0; INLINE];
            inline[..bytes.len()].copy_from_slice(bytes);
            Name(Repr::Inline { len: bytes.len() as u8, bytes: inline })
        } else {
            Name(Repr::Heap(bytes.into()))
        }
    }

    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..*len as usize],
            Repr::Heap(b) => b,
        }
    }

    /// The name as an owned vector.
    pub fn into_vec(self) -> Vec<u8> {
        match self.0 {
            Repr::Inline { .. } => self.as_bytes().to_vec(),
            Repr::Heap(b) => b.into_vec(),
        }
    }
}

impl Default for Name {
    fn default() -> Name {
        Name::new(b"")
    }
}

impl Deref for Name {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl AsRef<[u8]> for Name {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Borrow<[u8]> for Name {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}
impl Eq for Name {}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Name {
    fn cmp(&self, other: &Name) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl Hash for Name {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}

impl From<&[u8]> for Name {
    fn from(b: &[u8]) -> Name {
        Name::new(b)
    }
}
impl From<Vec<u8>> for Name {
    fn from(v: Vec<u8>) -> Name {
        if v.len() <= INLINE {
            Name::new(&v)
        } else {
            Name(Repr::Heap(v.into_boxed_slice()))
        }
    }
}
impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name::new(s.as_bytes())
    }
}
impl From<Name> for Vec<u8> {
    fn from(n: Name) -> Vec<u8> {
        n.into_vec()
    }
}

/// Comparisons with the other ways of spelling bytes (`name == b"a"`, `name == "a"`).
macro_rules! eq_bytes {
    ($($t:ty),*) => {$(
        impl PartialEq<$t> for Name {
            fn eq(&self, other: &$t) -> bool {
                self.as_bytes() == AsRef::<[u8]>::as_ref(other)
            }
        }
        impl PartialEq<Name> for $t {
            fn eq(&self, other: &Name) -> bool {
                AsRef::<[u8]>::as_ref(self) == other.as_bytes()
            }
        }
    )*};
}
eq_bytes!([u8], &[u8], Vec<u8>, str, &str);

impl<const N: usize> PartialEq<[u8; N]> for Name {
    fn eq(&self, other: &[u8; N]) -> bool {
        self.as_bytes() == other
    }
}
impl<const N: usize> PartialEq<&[u8; N]> for Name {
    fn eq(&self, other: &&[u8; N]) -> bool {
        self.as_bytes() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_names_keep_their_bytes_and_order() {
        let long = vec![b'x'; INLINE + 1];
        for bytes in [&b""[..], b"a", &[0xff, 0, 7], &[b'y'; INLINE], &long] {
            let n = Name::new(bytes);
            assert_eq!(n.as_bytes(), bytes);
            assert_eq!(Name::from(bytes.to_vec()), n);
            assert_eq!(n.clone().into_vec(), bytes);
        }
        assert!(matches!(Name::new(&long).0, Repr::Heap(_)));
        assert!(matches!(Name::new(&[1; INLINE]).0, Repr::Inline { .. }));
        // Order and equality are the bytes', whatever the representation.
        assert!(Name::new(b"a") < Name::new(&long));
        assert!(Name::new(&[b'x'; INLINE]) < Name::new(&long));
        assert_eq!(Name::from("abc"), *b"abc");
        assert_eq!(Name::from("abc"), b"abc");
        assert_eq!(Name::from("abc"), "abc");
        assert_eq!(std::mem::size_of::<Name>(), 32);
    }
}
