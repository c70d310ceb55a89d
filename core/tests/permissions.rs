//! POSIX permission checks when the store is used with a caller credential.

use txvfs::{Credential, ErrorKind, FileSystem, OpenOptions, Options, Store};

fn as_user(store: &Store, uid: u32, gid: u32) -> Store {
    store.with_credential(Some(Credential { uid, gid, groups: vec![] }))
}

#[test]
fn mode_bits_are_enforced_for_other_users() {
    let root = Store::open_with(
        "memory:",
        Options {
            credential: Some(Credential { uid: 0, gid: 0, groups: vec![] }),
            ..Options::default()
        },
    )
    .unwrap();
    root.mkdir("/home", 0o755).unwrap();
    root.mkdir("/home/alice", 0o700).unwrap();
    root.chown("/home/alice", Some(1000), Some(1000)).unwrap();
    let alice = as_user(&root, 1000, 1000);
    let bob = as_user(&root, 1001, 1001);
    alice.write_file("/home/alice/secret", b"s").unwrap();
    assert_eq!(bob.read_file("/home/alice/secret").unwrap_err().kind(), ErrorKind::Access);
    assert_eq!(bob.write_file("/home/x", b"").unwrap_err().kind(), ErrorKind::Access);
    assert_eq!(bob.chmod("/home/alice", 0o777).unwrap_err().kind(), ErrorKind::NotPermitted);
    alice.chmod("/home/alice", 0o755).unwrap();
    alice.chmod("/home/alice/secret", 0o640).unwrap();
    assert_eq!(bob.read_file("/home/alice/secret").unwrap_err().kind(), ErrorKind::Access);
    alice.chmod("/home/alice/secret", 0o644).unwrap();
    assert_eq!(bob.read_file("/home/alice/secret").unwrap(), b"s");
    let e = bob.open("/home/alice/secret", &OpenOptions::new().write(true)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Access);
    assert_eq!(bob.unlink("/home/alice/secret").unwrap_err().kind(), ErrorKind::Access);
    assert_eq!(
        alice.chown("/home/alice/secret", Some(1001), None).unwrap_err().kind(),
        ErrorKind::NotPermitted
    );
    // Group access through a supplementary group.
    alice.chmod("/home/alice/secret", 0o660).unwrap();
    root.chown("/home/alice/secret", None, Some(50)).unwrap();
    let carol = root.with_credential(Some(Credential { uid: 1002, gid: 1002, groups: vec![50] }));
    assert_eq!(carol.read_file("/home/alice/secret").unwrap(), b"s");
    // New files belong to their creator.
    let st = alice.stat("/home/alice/secret").unwrap();
    assert_eq!((st.uid, st.gid), (1000, 50));
}

#[test]
fn sticky_directories_protect_other_users_files() {
    let root = Store::open_with(
        "memory:",
        Options {
            credential: Some(Credential { uid: 0, gid: 0, groups: vec![] }),
            ..Options::default()
        },
    )
    .unwrap();
    root.mkdir("/tmp", 0o1777).unwrap();
    let alice = as_user(&root, 1000, 1000);
    let bob = as_user(&root, 1001, 1001);
    alice.write_file("/tmp/a", b"").unwrap();
    assert_eq!(bob.unlink("/tmp/a").unwrap_err().kind(), ErrorKind::NotPermitted);
    assert_eq!(bob.rename("/tmp/a", "/tmp/b").unwrap_err().kind(), ErrorKind::NotPermitted);
    alice.unlink("/tmp/a").unwrap();
}

#[test]
fn without_credential_the_store_acts_as_owner() {
    let store = Store::open("memory:").unwrap();
    store.write_file("/f", b"x").unwrap();
    store.chmod("/f", 0o000).unwrap();
    assert_eq!(store.read_file("/f").unwrap(), b"x");
}
