//! Comparing the whole tree of the model with txvfs's.

use super::ops::{fs_lstat, target_out};
use super::{Kind, Model, Val, ROOT};
use std::collections::{BTreeSet, HashMap};
use txvfs::{FileSystem, FileType};

/// Walks the model and the store (below `prefix`) together and compares every entry; also
/// checks that names sharing an inode in the model share one in the store, and the other way
/// round. Files in `dirty` (written through a write-back handle not yet synced) are compared
/// by kind and links only: others may or may not see their buffered bytes yet.
pub fn compare_trees<F: FileSystem>(m: &Model, fs: &F, prefix: &[u8], ctx: &str, counts: bool) {
    let dirty: BTreeSet<u64> = m.dirty();
    let mut inos: HashMap<u64, u64> = HashMap::new();
    let mut back: HashMap<u64, u64> = HashMap::new();
    let top = if prefix.is_empty() { b"/".to_vec() } else { prefix.to_vec() };
    let mut stack = vec![(top, ROOT)];
    while let Some((path, ino)) = stack.pop() {
        let show = String::from_utf8_lossy(&path).into_owned();
        let (st_ino, got) =
            fs_lstat(fs, prefix, &path).unwrap_or_else(|e| panic!("{ctx}: lstat {show}: {e}"));
        let want = m.stat_val(ino);
        if dirty.contains(&ino) {
            let (Val::Stat(gk, _, gn), Val::Stat(wk, _, wn)) = (&got, &want) else {
                unreachable!()
            };
            assert_eq!((gk, gn), (wk, wn), "{ctx}: attributes of {show} (write-back pending)");
        } else {
            assert_eq!(got, want, "{ctx}: attributes of {show}");
        }
        assert_eq!(*inos.entry(ino).or_insert(st_ino), st_ino, "{ctx}: hard links of {show}");
        assert_eq!(*back.entry(st_ino).or_insert(ino), ino, "{ctx}: inode reuse at {show}");
        match &m.nodes[&ino].kind {
            Kind::File(_) if dirty.contains(&ino) => {}
            Kind::File(d) => {
                let got = fs.read_file(&path).unwrap();
                assert!(
                    got == *d,
                    "{ctx}: contents of {show} ({} vs {} bytes)",
                    got.len(),
                    d.len()
                );
            }
            Kind::Symlink(t) => {
                assert_eq!(
                    &target_out(prefix, fs.readlink(&path).unwrap()),
                    t,
                    "{ctx}: target of {show}"
                )
            }
            Kind::Dir(entries) => {
                let got: Vec<(Vec<u8>, FileType)> = fs
                    .readdir(&path, None, 0)
                    .unwrap()
                    .into_iter()
                    .map(|e| (e.name.into_vec(), e.kind))
                    .collect();
                let want: Vec<(Vec<u8>, FileType)> =
                    entries.iter().map(|(n, &i)| (n.clone(), m.ftype(i))).collect();
                assert_eq!(got, want, "{ctx}: entries of {show}");
                for (n, &i) in entries {
                    let mut p = if path == b"/" { Vec::new() } else { path.clone() };
                    p.push(b'/');
                    p.extend_from_slice(n);
                    stack.push((p, i));
                }
            }
        }
    }
    if counts {
        // statfs reads the committed counters, so only outside a transaction; open
        // unlinked files (orphans) still count.
        assert_eq!(fs.statfs().unwrap().files, m.nodes.len() as u64, "{ctx}: statfs inode count");
    }
}
