//! The inode-addressed calls (what the FUSE adapter uses): each one against its path twin,
//! bad names and stale inodes, permissions from a credential, special files, and set_attr
//! being all or nothing.

use txvfs::schema::ROOT_INO;
use txvfs::{
    Credential, ErrorKind, FileSystem, FileType, InodeFileSystem, OpenOptions, Options,
    RenameFlags, SetAttr, SetTime, Store, XattrFlags,
};

fn store() -> Store {
    Store::open_with("memory:", Options::default()).unwrap()
}

fn as_user(store: &Store, uid: u32, gid: u32) -> Store {
    store.with_credential(Some(Credential { uid, gid, groups: vec![] }))
}

#[test]
fn names_under_directory_inodes_behave_like_paths() {
    let s = store();
    let d = s.mkdir_at(ROOT_INO, "d", 0o755).unwrap();
    assert!(d.is_dir());
    assert_eq!(s.stat("/d").unwrap().ino, d.ino);
    assert_eq!(s.lookup_at(ROOT_INO, "d").unwrap(), s.stat("/d").unwrap());

    let f =
        s.open_at(d.ino, "f", &OpenOptions::new().write(true).create(true).mode(0o640)).unwrap();
    f.write(b"hello").unwrap();
    let fino = f.ino();
    f.close().unwrap();
    assert_eq!(s.read_file("/d/f").unwrap(), b"hello");
    assert_eq!(s.stat_ino(fino).unwrap().mode & 0o7777, 0o640);

    let l = s.symlink_at("f", d.ino, "l").unwrap();
    assert_eq!(l.kind, FileType::Symlink);
    assert_eq!(s.readlink_ino(l.ino).unwrap(), b"f");
    assert_eq!(s.read_file("/d/l").unwrap(), b"hello");

    let h = s.link_at(fino, ROOT_INO, "hard").unwrap();
    assert_eq!((h.ino, h.nlink), (fino, 2));
    assert_eq!(s.read_file("/hard").unwrap(), b"hello");

    let names: Vec<Vec<u8>> =
        s.readdir_ino(d.ino, None, 0).unwrap().into_iter().map(|e| e.name.into_vec()).collect();
    assert_eq!(names, vec![b"f".to_vec(), b"l".to_vec()]);

    s.rename_at(d.ino, "f", ROOT_INO, "moved", RenameFlags::default()).unwrap();
    assert!(!s.exists("/d/f").unwrap());
    assert_eq!(s.read_file("/moved").unwrap(), b"hello");
    let e = s.rename_at(
        ROOT_INO,
        "moved",
        ROOT_INO,
        "hard",
        RenameFlags { no_replace: true, exchange: false },
    );
    assert_eq!(e.unwrap_err().kind(), ErrorKind::Exists);
    // Two names of one file: renaming one onto the other does nothing, as POSIX says.
    s.rename_at(ROOT_INO, "moved", ROOT_INO, "hard", RenameFlags::default()).unwrap();
    assert!(s.exists("/moved").unwrap());

    s.unlink_at(ROOT_INO, "hard").unwrap();
    assert_eq!(s.stat_ino(fino).unwrap().nlink, 1);
    assert_eq!(s.rmdir_at(ROOT_INO, "d").unwrap_err().kind(), ErrorKind::NotEmpty);
    s.unlink_at(d.ino, "l").unwrap();
    s.rmdir_at(ROOT_INO, "d").unwrap();
    assert_eq!(s.stat_ino(d.ino).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(s.lookup_at(d.ino, "x").unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn bad_names_and_wrong_types_change_nothing() {
    let s = store();
    s.write_file("/file", b"x").unwrap();
    let file = s.stat("/file").unwrap().ino;
    let before = s.readdir("/", None, 0).unwrap();
    for name in [&b"a/b"[..], b"", b".", b"..", b"a\0b", &[b'n'; 256]] {
        let e = s.mkdir_at(ROOT_INO, name, 0o755).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Invalid | ErrorKind::NameTooLong), "{name:?}: {e}");
        assert!(s.lookup_at(ROOT_INO, name).is_err());
    }
    assert_eq!(s.mkdir_at(file, "sub", 0o755).unwrap_err().kind(), ErrorKind::NotDir);
    assert_eq!(s.lookup_at(file, "sub").unwrap_err().kind(), ErrorKind::NotDir);
    assert_eq!(s.mkdir_at(ROOT_INO, "file", 0o755).unwrap_err().kind(), ErrorKind::Exists);
    assert_eq!(s.unlink_at(ROOT_INO, "missing").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(s.rmdir_at(ROOT_INO, "file").unwrap_err().kind(), ErrorKind::NotDir);
    assert_eq!(s.readdir_ino(file, None, 0).unwrap_err().kind(), ErrorKind::NotDir);
    assert_eq!(s.readlink_ino(file).unwrap_err().kind(), ErrorKind::Invalid);
    assert_eq!(s.link_at(ROOT_INO, ROOT_INO, "root2").unwrap_err().kind(), ErrorKind::NotPermitted);
    assert_eq!(s.stat_ino(987_654).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(
        s.mknod_at(ROOT_INO, "dir", FileType::Dir, 0o755, 0).unwrap_err().kind(),
        ErrorKind::Invalid
    );
    assert_eq!(s.readdir("/", None, 0).unwrap(), before);
}

#[test]
fn special_files_keep_type_and_device_number_but_cannot_be_opened() {
    let s = store();
    let fifo = s.mknod_at(ROOT_INO, "fifo", FileType::Fifo, 0o644, 0).unwrap();
    assert_eq!(fifo.mode, libc::S_IFIFO | 0o644);
    let dev =
        s.mknod_at(ROOT_INO, "null", FileType::CharDevice, 0o666, libc::makedev(1, 3)).unwrap();
    assert_eq!((dev.kind, dev.rdev, dev.size), (FileType::CharDevice, libc::makedev(1, 3), 0));
    s.mknod("/sock", FileType::Socket, 0o600, 0).unwrap();
    s.mknod("/blk", FileType::BlockDevice, 0o600, libc::makedev(8, 1)).unwrap();
    assert_eq!(s.lstat("/blk").unwrap().rdev, libc::makedev(8, 1));
    assert_eq!(s.lstat("/sock").unwrap().mode & libc::S_IFMT, libc::S_IFSOCK);
    assert_eq!(s.mknod("/f", FileType::File, 0o600, 0).unwrap_err().kind(), ErrorKind::Invalid);
    for p in ["/fifo", "/null", "/sock"] {
        assert_eq!(
            s.open(p, &OpenOptions::new().read(true)).unwrap_err().kind(),
            ErrorKind::Invalid,
            "{p}"
        );
    }
    assert_eq!(s.truncate("/fifo", 1).unwrap_err().kind(), ErrorKind::Invalid);
    // They survive a reopen and removal frees them.
    let kinds: Vec<FileType> =
        s.readdir("/", None, 0).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![FileType::BlockDevice, FileType::Fifo, FileType::CharDevice, FileType::Socket]
    );
    let inodes = s.statfs().unwrap().files;
    s.unlink("/null").unwrap();
    assert_eq!(s.statfs().unwrap().files, inodes - 1);
}

#[test]
fn permissions_come_from_the_callers_credential() {
    let s = store();
    s.mkdir("/private", 0o700).unwrap();
    let private = s.stat("/private").unwrap().ino;
    s.write_file("/private/secret", b"s").unwrap();
    s.write_file("/shared", b"data").unwrap();
    s.chmod("/shared", 0o644).unwrap();
    let shared = s.stat("/shared").unwrap().ino;

    let user = as_user(&s, 1000, 1000);
    assert_eq!(user.lookup_at(private, "secret").unwrap_err().kind(), ErrorKind::Access);
    assert_eq!(user.mkdir_at(ROOT_INO, "mine", 0o755).unwrap_err().kind(), ErrorKind::Access);
    assert_eq!(
        user.open_ino(shared, &OpenOptions::new().write(true)).unwrap_err().kind(),
        ErrorKind::Access
    );
    assert!(user.open_ino(shared, &OpenOptions::new().read(true)).is_ok());
    assert_eq!(user.access_ino(shared, 4), Ok(()));
    assert_eq!(user.access_ino(shared, 2).unwrap_err().kind(), ErrorKind::Access);
    assert_eq!(user.unlink_at(ROOT_INO, "shared").unwrap_err().kind(), ErrorKind::Access);
    assert_eq!(
        user.setxattr_ino(shared, "user.x", b"1", XattrFlags::default()).unwrap_err().kind(),
        ErrorKind::Access
    );
    let e = user.set_attr(shared, &SetAttr { size: Some(0), ..SetAttr::default() });
    assert_eq!(e.unwrap_err().kind(), ErrorKind::Access);
    assert_eq!(s.read_file("/shared").unwrap(), b"data");

    // The owner may chmod but not give the file away: the whole set_attr fails, mode included.
    s.chown("/shared", Some(1000), Some(1000)).unwrap();
    let e =
        user.set_attr(shared, &SetAttr { mode: Some(0o600), uid: Some(0), ..SetAttr::default() });
    assert_eq!(e.unwrap_err().kind(), ErrorKind::NotPermitted);
    assert_eq!(s.stat_ino(shared).unwrap().mode & 0o7777, 0o644);
    let st = user
        .set_attr(
            shared,
            &SetAttr {
                mode: Some(0o600),
                size: Some(2),
                mtime: SetTime::At(5_000_000_000),
                ..SetAttr::default()
            },
        )
        .unwrap();
    assert_eq!((st.mode & 0o7777, st.size, st.mtime_ns), (0o600, 2, 5_000_000_000));
    assert_eq!(s.read_file("/shared").unwrap(), b"da");
}

#[test]
fn extended_attributes_by_inode() {
    let s = store();
    let f = s.mknod_at(ROOT_INO, "f", FileType::File, 0o644, 0).unwrap();
    assert_eq!(f.size, 0);
    s.setxattr_ino(f.ino, "user.a", b"1", XattrFlags::Create).unwrap();
    assert_eq!(
        s.setxattr_ino(f.ino, "user.a", b"2", XattrFlags::Create).unwrap_err().kind(),
        ErrorKind::Exists
    );
    assert_eq!(s.getxattr("/f", "user.a").unwrap(), b"1");
    assert_eq!(s.getxattr_ino(f.ino, "user.a").unwrap(), b"1");
    assert_eq!(s.listxattr_ino(f.ino).unwrap(), vec![b"user.a".to_vec()]);
    s.removexattr_ino(f.ino, "user.a").unwrap();
    assert_eq!(s.getxattr_ino(f.ino, "user.a").unwrap_err().kind(), ErrorKind::NoData);
}
