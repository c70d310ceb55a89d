//! Replaying a change feed onto a model tree (path -> type), and listing a store's tree the
//! same way, so a test can check that the feed describes exactly what the store holds.

#![allow(dead_code)]

use std::collections::BTreeMap;
use txvfs::{Batch, ChangeKind, FileSystem, FileType, Store};

/// A tree as paths and types.
pub type Tree = BTreeMap<Vec<u8>, FileType>;

fn under(path: &[u8], top: &[u8]) -> bool {
    path.starts_with(top) && (path.len() == top.len() || path[top.len()] == b'/')
}

fn remove_subtree(tree: &mut Tree, top: &[u8]) {
    tree.retain(|p, _| !under(p, top));
}

/// Applies the changes of `batches`, in order, to `tree`.
pub fn replay(tree: &mut Tree, batches: &[Batch]) {
    for b in batches {
        for c in &b.changes {
            match c.kind {
                ChangeKind::Created | ChangeKind::Linked => {
                    tree.insert(c.path.clone(), c.file_type);
                }
                ChangeKind::Removed => remove_subtree(tree, &c.path),
                ChangeKind::Renamed => {
                    let to = c.to.clone().unwrap();
                    let moved: Vec<(Vec<u8>, FileType)> = tree
                        .iter()
                        .filter(|(p, _)| under(p, &c.path))
                        .map(|(p, t)| (p.clone(), *t))
                        .collect();
                    remove_subtree(tree, &c.path);
                    remove_subtree(tree, &to);
                    for (p, t) in moved {
                        tree.insert([&to[..], &p[c.path.len()..]].concat(), t);
                    }
                }
                ChangeKind::Written | ChangeKind::Attrs | ChangeKind::Xattrs => {}
            }
        }
    }
}

/// The store's tree (the root excluded).
pub fn tree_of(store: &Store) -> Tree {
    let mut out = Tree::new();
    let mut dirs = vec![b"/".to_vec()];
    while let Some(d) = dirs.pop() {
        for e in store.readdir(&d, None, 0).unwrap() {
            let p = if d == b"/" {
                [b"/", &e.name[..]].concat()
            } else {
                [&d[..], b"/", &e.name[..]].concat()
            };
            if e.kind == FileType::Dir {
                dirs.push(p.clone());
            }
            out.insert(p, e.kind);
        }
    }
    out
}
