//! The read cache's copy of a key: held inline up to [`INLINE`] bytes (every inode, dentry
//! with a name of up to 21 bytes, block and orphan key), on the heap beyond. The cache keeps a
//! key in its hash map, its ordered set and a queue slot; as `Vec<u8>` that was three
//! allocations per entry (four with the commit's write set) and, for every lookup, a jump
//! from the hash table's slot to the key's heap copy to compare it (measured with `perf` on
//! `txvfs-profile read`: the hash lookups were a fifth of an open+read+close, half of that
//! the comparison's `memcmp` on memory not yet in the CPU's cache).

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

/// Bytes a key may have and still be held inline (the whole key is 32 bytes either way).
pub(crate) const INLINE: usize = 30;

/// A key as the read cache holds it; it hashes, compares and orders as its bytes do, so a
/// map keyed by it is looked up with a `&[u8]`.
#[derive(Clone)]
pub(crate) enum Key {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl Key {
    /// The key's bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => &bytes[..*len as usize],
            Key::Heap(b) => b,
        }
    }
}

impl From<&[u8]> for Key {
    fn from(k: &[u8]) -> Key {
        if k.len() <= INLINE {
            let mut bytes = [0u8; INLINE];
            bytes[..k.len()].copy_from_slice(k);
            Key::Inline { len: k.len() as u8, bytes }
        } else {
            Key::Heap(k.into())
        }
    }
}

impl Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `[u8]` hashes, which `Borrow` requires.
        self.as_slice().hash(state)
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashMap};

    #[test]
    fn short_and_long_keys_are_found_by_their_bytes_and_kept_in_byte_order() {
        let keys: Vec<Vec<u8>> = vec![
            vec![],
            b"a".to_vec(),
            vec![0u8; INLINE],
            vec![0u8; INLINE + 1],
            vec![1u8; INLINE - 1],
            vec![1u8; 200],
            b"b".to_vec(),
        ];
        let mut map = HashMap::new();
        let mut set = BTreeSet::new();
        for (i, k) in keys.iter().enumerate() {
            map.insert(Key::from(k.as_slice()), i);
            set.insert(Key::from(k.as_slice()));
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(map.get(k.as_slice()), Some(&i), "key {k:?}");
            assert_eq!(Key::from(k.as_slice()).as_slice(), k.as_slice());
        }
        assert!(!map.contains_key(&[0u8; INLINE - 1][..]), "a prefix is another key");
        let mut sorted = keys.clone();
        sorted.sort();
        let ordered: Vec<&[u8]> = set.iter().map(Key::as_slice).collect();
        assert_eq!(ordered, sorted.iter().map(Vec::as_slice).collect::<Vec<_>>());
        assert_eq!(std::mem::size_of::<Key>(), 32);
    }
}
