//! Runs the built `txvfs` binary against temporary RocksDB stores.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_txvfs");

/// A temporary directory holding a store (`st`) and host trees.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env { dir: tempfile::tempdir().unwrap() }
    }
    fn store(&self) -> PathBuf {
        self.dir.path().join("st")
    }
    fn host(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.env_remove("TXVFS_STORE").arg("--store").arg(self.store()).args(args);
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
    fn run_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        let mut child = self
            .cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    }
    /// Runs a command that must succeed; returns its standard output.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "txvfs {args:?} failed: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }
    /// Runs a command that must fail with one `txvfs: ` line; returns (exit code, message).
    fn fails(&self, args: &[&str]) -> (i32, String) {
        let o = self.run(args);
        assert!(!o.status.success(), "txvfs {args:?} succeeded");
        let err = String::from_utf8(o.stderr).unwrap();
        assert!(
            err.starts_with("txvfs: ") && err.lines().count() == 1,
            "txvfs {args:?}: stderr {err:?}"
        );
        (o.status.code().unwrap(), err)
    }
    fn init(self) -> Env {
        self.ok(&["init"]);
        self
    }
}

#[test]
fn missing_store_init_and_no_store_given() {
    let env = Env::new();
    let (code, msg) = env.fails(&["ls", "/"]);
    assert_eq!(code, libc::ENOENT);
    assert!(msg.contains("no store there"), "{msg}");
    assert!(!env.store().exists(), "a store was created without init");
    env.fails(&["fsck"]);
    env.ok(&["init", "--block-size", "4096", "--inline-limit", "100"]);
    assert_eq!(env.ok(&["ls", "/"]), "");
    let (code, msg) = env.fails(&["init"]);
    assert_eq!(code, libc::EEXIST, "{msg}");
    // The environment variable works instead of --store; with neither, a clear error.
    let o =
        Command::new(BIN).env("TXVFS_STORE", env.store()).args(["mkdir", "/e"]).output().unwrap();
    assert!(o.status.success());
    let o = Command::new(BIN).env_remove("TXVFS_STORE").args(["ls"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--store"));
    // A bad block size is refused by the core with one line.
    let other = Env::new();
    let (_, msg) = other.fails(&["init", "--block-size", "1000"]);
    assert!(msg.contains("block size"), "{msg}");
}

#[test]
fn bad_arguments_and_help() {
    let env = Env::new().init();
    for args in [
        &["bogus"][..],
        &["mkdir"],
        &["cat"],
        &["put", "only-one"],
        &["ls", "-x"],
        &["mkdir", "-m", "999", "/d"],
        &["import", "a", "/b", "--batch", "0"],
    ] {
        let o = env.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).starts_with("error: "), "{args:?}");
    }
    for cmd in [
        "init", "ls", "cat", "put", "get", "import", "export", "mkdir", "rm", "mv", "cp", "ln",
        "stat", "tree", "du", "df", "fsck", "mount",
    ] {
        let o = Command::new(BIN).args([cmd, "--help"]).output().unwrap();
        assert!(
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains("Usage"),
            "{cmd} --help"
        );
    }
    // A mountpoint that does not exist fails before mounting (bindings/fuse/tests/mount_cli.rs
    // runs real mounts).
    let missing = env.host("no-such-mountpoint");
    let (code, msg) = env.fails(&["mount", missing.to_str().unwrap()]);
    assert_eq!(code, libc::ENOENT, "{msg}");
}

#[test]
fn file_commands() {
    let env = Env::new().init();
    env.ok(&["mkdir", "-p", "/a/b/c"]);
    env.ok(&["mkdir", "-p", "/a/b/c"]);
    assert_eq!(env.fails(&["mkdir", "/a"]).0, libc::EEXIST);
    env.ok(&["mkdir", "-m", "700", "/private"]);
    assert!(env.ok(&["stat", "/private"]).contains("(0700/drwx------)"));

    let host = env.host("in.bin");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&host, &data).unwrap();
    std::fs::set_permissions(&host, std::fs::Permissions::from_mode(0o640)).unwrap();
    env.ok(&["put", host.to_str().unwrap(), "/a/data"]);
    assert!(env.ok(&["stat", "/a/data"]).contains("(0640/-rw-r-----)"));
    assert!(env.run(&["cat", "/a/data"]).stdout == data);
    let out = env.host("out.bin");
    env.ok(&["get", "/a/data", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    let o = env.run_stdin(&["put", "-", "/a/hello"], b"hello\n");
    assert!(o.status.success());
    assert_eq!(env.run(&["get", "/a/hello", "-"]).stdout, b"hello\n");
    assert_eq!(env.ok(&["cat", "/a/hello", "/a/hello"]), "hello\nhello\n");

    assert_eq!(env.ok(&["ls", "/a"]), "b\ndata\nhello\n");
    let long = env.ok(&["ls", "-l", "/a"]);
    assert!(
        long.lines()
            .any(|l| l.starts_with("-rw-r-----") && l.contains(" 300000 ") && l.ends_with(" data")),
        "{long}"
    );
    let rec = env.ok(&["ls", "-R", "/a"]);
    assert!(rec.contains("/a/b:\nc\n") && rec.contains("/a/b/c:\n"), "{rec}");

    env.ok(&["ln", "-s", "hello", "/a/sym"]);
    env.ok(&["ln", "/a/hello", "/a/hard"]);
    assert_eq!(env.ok(&["cat", "/a/sym"]), "hello\n");
    assert!(env.ok(&["stat", "/a/hard"]).contains("Links: 2"));
    assert!(env.ok(&["ls", "-l", "/a"]).contains("sym -> hello"));

    env.ok(&["mv", "/a/hello", "/a/b"]);
    assert_eq!(env.ok(&["cat", "/a/b/hello"]), "hello\n");
    env.ok(&["mv", "/a/b/hello", "/a/greeting"]);
    env.ok(&["cp", "/a/greeting", "/copy"]);
    assert_eq!(env.ok(&["cat", "/copy"]), "hello\n");
    assert_eq!(env.fails(&["cp", "/a", "/a2"]).0, libc::EISDIR);
    env.ok(&["cp", "-r", "/a", "/a2"]);
    assert_eq!(env.run(&["cat", "/a2/data"]).stdout, data);
    assert!(env.ok(&["ls", "-l", "/a2"]).contains("sym -> hello"));
    assert!(env.fails(&["cp", "-r", "/a", "/a/b/inside"]).1.contains("into itself"));

    let tree = env.ok(&["tree", "/a"]);
    assert!(
        tree.starts_with("/a\n") && tree.contains("└── c") && tree.contains("sym -> hello"),
        "{tree}"
    );
    assert!(tree.ends_with("2 directories, 4 files\n"), "{tree}");
    assert_eq!(env.ok(&["du", "-s", "/a"]), "300011\t/a\n");
    assert!(env.ok(&["du", "/a"]).contains("0\t/a/b/c\n"));
    let df = env.ok(&["df"]);
    assert!(df.starts_with("Store") && df.lines().count() == 2, "{df}");

    assert_eq!(env.fails(&["rm", "/a"]).0, libc::EISDIR);
    env.ok(&["rm", "/copy", "/a/sym"]);
    assert_eq!(env.fails(&["cat", "/copy"]).0, libc::ENOENT);
    env.ok(&["rm", "-r", "/a", "/a2"]);
    assert_eq!(env.ok(&["ls"]), "private\n");
    let (code, msg) = env.fails(&["cat", "/nope"]);
    assert_eq!(code, libc::ENOENT);
    assert!(msg.contains("/nope"), "{msg}");
    assert_eq!(env.ok(&["fsck"]), "clean\n");
}

/// `rm -r` of a tree of several batches: nothing on standard error when it is not a terminal;
/// on a terminal (through util-linux `script`, when installed) the progress line shows the
/// entries removed and the rate, and is cleared at the end.
#[test]
fn rm_recursive_progress() {
    let env = Env::new().init();
    let many = env.host("many");
    for d in 0..3 {
        std::fs::create_dir_all(many.join(format!("d{d}"))).unwrap();
        for f in 0..1000 {
            std::fs::write(many.join(format!("d{d}/f{f}")), b"x").unwrap();
        }
    }
    env.ok(&["import", many.to_str().unwrap(), "/t"]);
    let o = env.run(&["rm", "-r", "/t"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        o.stdout.is_empty() && o.stderr.is_empty(),
        "piped rm -r must stay quiet: {:?}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(env.ok(&["ls"]), "");

    env.ok(&["import", many.to_str().unwrap(), "/t"]);
    let line = format!("'{BIN}' --store '{}' rm -r /t", env.store().display());
    match Command::new("script").args(["-qec", &line, "/dev/null"]).stdin(Stdio::null()).output() {
        Ok(o) => {
            let tty = String::from_utf8_lossy(&o.stdout);
            assert!(o.status.success(), "{tty}");
            assert!(
                tty.contains("rm: removed ") && tty.contains("/s"),
                "no progress line on a terminal: {tty:?}"
            );
            assert!(
                tty.trim_end_matches(['\r', '\n']).ends_with("\r\x1b[K"),
                "progress line not cleared: {tty:?}"
            );
        }
        Err(e) => eprintln!("terminal display not checked (`script`: {e})"),
    }
    assert_eq!(env.ok(&["ls"]), "");
    assert_eq!(env.ok(&["fsck"]), "clean\n");
}

fn set_times(p: &Path, sec: i64, nsec: i64) {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    let t = libc::timespec { tv_sec: sec, tv_nsec: nsec };
    // SAFETY: valid C string and a two-element array.
    assert_eq!(
        unsafe {
            libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [t, t].as_ptr(), libc::AT_SYMLINK_NOFOLLOW)
        },
        0
    );
}

/// Sets a user xattr; false if the host file system has none.
fn set_xattr(p: &Path, name: &str, value: &[u8]) -> bool {
    let (c, n) = (CString::new(p.as_os_str().as_bytes()).unwrap(), CString::new(name).unwrap());
    // SAFETY: valid C strings and buffer.
    unsafe { libc::lsetxattr(c.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), 0) == 0 }
}

fn get_xattr(p: &Path, name: &str) -> Option<Vec<u8>> {
    let (c, n) = (CString::new(p.as_os_str().as_bytes()).unwrap(), CString::new(name).unwrap());
    let mut buf = vec![0u8; 256];
    // SAFETY: valid C strings and a buffer of buf.len() bytes.
    let r = unsafe { libc::lgetxattr(c.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (r >= 0).then(|| buf[..r as usize].to_vec())
}

/// A host tree with modes, times, a symlink, hard links, xattrs and a large file.
fn make_tree(root: &Path) -> bool {
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    std::fs::write(root.join("a.txt"), b"alpha").unwrap();
    std::fs::write(root.join("sub/big"), vec![7u8; 200_000]).unwrap();
    std::fs::write(root.join("sub/deeper/empty"), b"").unwrap();
    std::fs::hard_link(root.join("a.txt"), root.join("sub/a-link")).unwrap();
    std::os::unix::fs::symlink("../a.txt", root.join("sub/sym")).unwrap();
    std::fs::set_permissions(root.join("a.txt"), std::fs::Permissions::from_mode(0o604)).unwrap();
    std::fs::set_permissions(root.join("sub/deeper"), std::fs::Permissions::from_mode(0o750))
        .unwrap();
    let xattrs = set_xattr(&root.join("a.txt"), "user.color", b"blue")
        && set_xattr(&root.join("sub"), "user.dir", b"yes");
    for (i, p) in ["a.txt", "sub/big", "sub/deeper/empty", "sub/sym", "sub/deeper", "sub", ""]
        .iter()
        .enumerate()
    {
        set_times(&root.join(p), 1_000_000_000 + i as i64 * 1000, 123_456_789);
    }
    xattrs
}

/// Asserts that two host trees hold the same names, types, modes, mtimes, data, symlinks,
/// hard links and user xattrs.
fn assert_same_tree(a: &Path, b: &Path, xattrs: bool) {
    let (ma, mb) = (std::fs::symlink_metadata(a).unwrap(), std::fs::symlink_metadata(b).unwrap());
    assert_eq!(ma.file_type(), mb.file_type(), "{}", b.display());
    if ma.file_type().is_symlink() {
        // The core sets times through symlinks, so a symlink's own times are not kept.
        assert_eq!(std::fs::read_link(a).unwrap(), std::fs::read_link(b).unwrap());
        return;
    }
    assert_eq!(
        (ma.mtime(), ma.mtime_nsec()),
        (mb.mtime(), mb.mtime_nsec()),
        "mtime of {}",
        b.display()
    );
    assert_eq!(ma.mode(), mb.mode(), "mode of {}", b.display());
    assert_eq!(ma.nlink(), mb.nlink(), "links of {}", b.display());
    if xattrs {
        assert_eq!(get_xattr(a, "user.color"), get_xattr(b, "user.color"));
        assert_eq!(get_xattr(a, "user.dir"), get_xattr(b, "user.dir"));
    }
    if ma.is_dir() {
        let names = |p: &Path| {
            let mut v: Vec<_> =
                std::fs::read_dir(p).unwrap().map(|e| e.unwrap().file_name()).collect();
            v.sort();
            v
        };
        let (na, nb) = (names(a), names(b));
        assert_eq!(na, nb, "entries of {}", b.display());
        for n in na {
            assert_same_tree(&a.join(&n), &b.join(&n), xattrs);
        }
    } else {
        assert_eq!(std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    }
}

#[test]
fn import_export_round_trip() {
    for atomic in [false, true] {
        let env = Env::new().init();
        let src = env.host("src");
        let xattrs = make_tree(&src);
        let mut args = vec!["import", src.to_str().unwrap(), "/imp/tree"];
        if atomic {
            args.push("--atomic");
        } else {
            args.extend(["--batch", "2"]);
        }
        let o = env.run(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(o.stderr.is_empty(), "progress must stay quiet when not on a terminal");
        assert!(env.ok(&["stat", "/imp/tree/sub/a-link"]).contains("Links: 2"));
        assert_eq!(env.ok(&["cat", "/imp/tree/sub/sym"]), "alpha");
        let dst = env.host("dst");
        env.ok(&["export", "/imp/tree", dst.to_str().unwrap()]);
        assert_same_tree(&src, &dst, xattrs);
        let (a, b) = (
            std::fs::metadata(dst.join("a.txt")).unwrap(),
            std::fs::metadata(dst.join("sub/a-link")).unwrap(),
        );
        assert_eq!(a.ino(), b.ino(), "hard link kept on export");
        assert_eq!(env.ok(&["fsck"]), "clean\n");
    }
}

fn store_ino(env: &Env, path: &str) -> String {
    let st = env.ok(&["stat", path]);
    st.lines().find(|l| l.contains("Inode:")).unwrap().to_string()
}

#[test]
fn interrupted_import_resumes() {
    let env = Env::new().init();
    let src = env.host("src");
    let xattrs = make_tree(&src);
    // A first run that got only part of the way: the store holds some of the tree, one file
    // with stale contents, and lacks the rest.
    env.ok(&["import", src.to_str().unwrap(), "/t"]);
    env.ok(&["rm", "-r", "/t/sub/deeper"]);
    env.ok(&["rm", "/t/sub/a-link"]);
    let o = env.run_stdin(&["put", "-", "/t/sub/big"], b"partial");
    assert!(o.status.success());
    let kept = ino_of(&env, "/t/a.txt");
    env.ok(&["import", "--batch", "3", src.to_str().unwrap(), "/t"]);
    assert_eq!(ino_of(&env, "/t/a.txt"), kept, "an entry already imported is skipped");
    let dst = env.host("dst");
    env.ok(&["export", "/t", dst.to_str().unwrap()]);
    assert_same_tree(&src, &dst, xattrs);

    // A real interruption: kill an import of many small files midway, then rerun it.
    let many = env.host("many");
    for d in 0..20 {
        std::fs::create_dir_all(many.join(format!("d{d}"))).unwrap();
        for f in 0..100 {
            std::fs::write(many.join(format!("d{d}/f{f}")), format!("{d}/{f}")).unwrap();
        }
    }
    let mut child =
        env.cmd(&["import", "--batch", "50", many.to_str().unwrap(), "/many"]).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let _ = child.kill();
    child.wait().unwrap();
    env.ok(&["import", "--batch", "50", many.to_str().unwrap(), "/many"]);
    let out = env.host("many-out");
    env.ok(&["export", "/many", out.to_str().unwrap()]);
    assert_same_tree(&many, &out, false);
    assert_eq!(env.ok(&["fsck"]), "clean\n");
}

/// Inode number of a store path, from `txvfs stat`.
fn ino_of(env: &Env, path: &str) -> u64 {
    store_ino(env, path).split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn fsck_finds_and_repairs_damage() {
    let env = Env::new();
    env.ok(&["init", "--block-size", "4096"]);
    let src = env.host("src");
    make_tree(&src);
    env.ok(&["import", src.to_str().unwrap(), "/t"]);
    env.ok(&["mkdir", "/victim-dir"]);
    let o = env.run_stdin(&["put", "-", "/victim"], b"doomed");
    assert!(o.status.success());
    assert_eq!(env.ok(&["fsck"]), "clean\n");

    let victim = ino_of(&env, "/victim");
    let big = ino_of(&env, "/t/sub/big");
    let a = ino_of(&env, "/t/a.txt");
    {
        use txvfs::schema;
        let backend = txvfs::kv::open(env.store().to_str().unwrap()).unwrap();
        let mut tx = backend.begin().unwrap();
        // An entry whose inode is gone; a block beyond the file's size; a wrong link count.
        tx.clear(&schema::inode_key(victim)).unwrap();
        tx.set(&schema::block_key(big, 1000), &schema::Block::encode_data(b"stray")).unwrap();
        let mut inode =
            schema::Inode::decode(&tx.get(&schema::inode_key(a)).unwrap().unwrap()).unwrap();
        inode.nlink = 5;
        tx.set(&schema::inode_key(a), &inode.encode()).unwrap();
        tx.commit(true).unwrap();
    }
    let o = env.run(&["fsck"]);
    assert_eq!(o.status.code(), Some(1));
    let report = String::from_utf8(o.stdout).unwrap();
    assert!(report.contains(&format!("points to missing inode {victim}")), "{report}");
    assert!(
        report.contains(&format!("block 1000 of inode {big} lies beyond its size")),
        "{report}"
    );
    assert!(report.contains(&format!("inode {a} has link count 5, but 2 entries")), "{report}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--repair"));

    let repaired = env.ok(&["fsck", "--repair"]);
    assert!(repaired.contains("repaired"), "{repaired}");
    assert_eq!(env.ok(&["fsck"]), "clean\n");
    assert_eq!(env.fails(&["cat", "/victim"]).0, libc::ENOENT);
    assert!(env.ok(&["stat", "/t/a.txt"]).contains("Links: 2"));
    assert_eq!(env.run(&["cat", "/t/sub/big"]).stdout, vec![7u8; 200_000]);
}

/// Data written ahead as chunks (a transaction over 64 MiB on RocksDB) checks clean; stray
/// chunks, xattrs of missing inodes and unreachable inodes are repaired; a missing chunk is
/// reported and left (nothing can restore it).
#[test]
fn fsck_chunks_orphans_and_unrepairable_damage() {
    use txvfs::schema;
    let env = Env::new().init();
    let big = env.host("big");
    let data: Vec<u8> = (0..70_000_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(&big, &data).unwrap();
    env.ok(&["put", big.to_str().unwrap(), "/big"]);
    let o = env.run_stdin(&["put", "-", "/lost"], b"nobody links me");
    assert!(o.status.success());
    assert_eq!(env.ok(&["fsck"]), "clean\n");
    let (big_ino, lost) = (ino_of(&env, "/big"), ino_of(&env, "/lost"));

    let backend = txvfs::kv::open(env.store().to_str().unwrap()).unwrap();
    let mut tx = backend.begin().unwrap();
    let chunks = tx.get_range(b"C", b"D", 0, false).unwrap();
    assert!(!chunks.is_empty(), "the large put wrote chunks ahead");
    tx.set(&schema::chunk_key(999_999, 0, 1), b"stray").unwrap();
    tx.set(&schema::xattr_key(888_888, b"user.x"), b"v").unwrap();
    tx.clear(&schema::dentry_key(schema::ROOT_INO, b"lost")).unwrap();
    tx.commit(true).unwrap();
    drop(backend);
    let report = String::from_utf8(env.run(&["fsck"]).stdout).unwrap();
    assert!(report.contains("chunk of inode 999999 that no block"), "{report}");
    assert!(report.contains("xattr \"user.x\" of missing inode 888888"), "{report}");
    assert!(report.contains(&format!("inode {lost} (File) is in no directory")), "{report}");
    env.ok(&["fsck", "--repair"]);
    assert_eq!(env.ok(&["fsck"]), "clean\n");
    env.ok(&["ls"]); // the next open deletes the unreachable inode, recorded as an orphan
    assert_eq!(env.ok(&["fsck"]), "clean\n");
    let backend = txvfs::kv::open(env.store().to_str().unwrap()).unwrap();
    assert!(
        backend.begin().unwrap().get(&schema::inode_key(lost)).unwrap().is_none(),
        "orphan reaped"
    );
    drop(backend);

    let backend = txvfs::kv::open(env.store().to_str().unwrap()).unwrap();
    let mut tx = backend.begin().unwrap();
    let (k, _) = tx.get_range(b"C", b"D", 1, false).unwrap().remove(0);
    tx.clear(&k).unwrap();
    tx.commit(true).unwrap();
    drop(backend);
    let o = env.run(&["fsck", "--repair"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout)
        .contains(&format!("of inode {big_ino} refers to a missing chunk")));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot be repaired safely"));
}

#[test]
fn snapshots_and_clones() {
    let e = Env::new().init();
    e.ok(&["mkdir", "/d"]);
    e.run_stdin(&["put", "-", "/d/a"], b"v1");
    let uri = e.ok(&["snapshot", "create", "v1"]);
    let uri = uri.trim();
    assert!(uri.starts_with("rocksdb:") && uri.ends_with("?snapshot=v1"), "{uri}");
    e.run_stdin(&["put", "-", "/d/a"], b"v2");
    let listed = e.ok(&["snapshot", "list"]);
    assert_eq!(listed, format!("v1\t{uri}\n"));
    // The snapshot reads like any store and refuses changes with EROFS (exit code 30).
    let snap = |args: &[&str]| {
        let mut c = Command::new(BIN);
        c.env_remove("TXVFS_STORE").arg("--store").arg(uri).args(args);
        c.output().unwrap()
    };
    assert_eq!(snap(&["cat", "/d/a"]).stdout, b"v1");
    let o = snap(&["rm", "/d/a"]);
    assert_eq!(o.status.code(), Some(libc::EROFS), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(e.fails(&["snapshot", "create", "v1"]).0, libc::EEXIST);
    // A clone of the snapshot: changes stay in the clone.
    let clone = e.host("clone");
    let o = Command::new(BIN)
        .env_remove("TXVFS_STORE")
        .args(["clone", uri, clone.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let in_clone = |args: &[&str]| {
        let o = Command::new(BIN)
            .env_remove("TXVFS_STORE")
            .arg("--store")
            .arg(&clone)
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "txvfs {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        o.stdout
    };
    assert_eq!(in_clone(&["cat", "/d/a"]), b"v1");
    in_clone(&["mv", "/d", "/e"]);
    in_clone(&["rm", "/e/a"]);
    assert_eq!(in_clone(&["ls", "/"]), b"e\n");
    assert_eq!(in_clone(&["fsck"]), b"clean\n");
    assert_eq!(snap(&["cat", "/d/a"]).stdout, b"v1");
    // A clone over a live store is refused: it could change under the clone.
    let o = Command::new(BIN)
        .env_remove("TXVFS_STORE")
        .args(["clone", e.store().to_str().unwrap(), e.host("c2").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(libc::EINVAL));
    e.ok(&["snapshot", "delete", "v1"]);
    assert_eq!(e.ok(&["snapshot", "list"]), "");
    assert_eq!(e.fails(&["snapshot", "delete", "v1"]).0, libc::ENOENT);
    assert_eq!(e.ok(&["cat", "/d/a"]), "v2");
}

#[test]
fn pack_round_trips_from_a_host_directory_and_from_a_store() {
    let env = Env::new().init();
    let src = env.host("src");
    let xattrs = make_tree(&src);
    // Host directory -> pack -> export.
    let img = env.host("host.pack");
    let o = env.run(&["pack", src.to_str().unwrap(), img.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        o.stderr.is_empty() && o.stdout.is_empty(),
        "pack must stay quiet when not on a terminal"
    );
    let pack_uri = format!("pack:{}", img.display());
    let on_pack = |args: &[&str]| {
        let o = Command::new(BIN)
            .env_remove("TXVFS_STORE")
            .arg("--store")
            .arg(&pack_uri)
            .args(args)
            .output()
            .unwrap();
        (
            o.status.code().unwrap(),
            String::from_utf8(o.stdout).unwrap(),
            String::from_utf8(o.stderr).unwrap(),
        )
    };
    assert_eq!(on_pack(&["cat", "/sub/sym"]), (0, "alpha".into(), String::new()));
    assert_eq!(on_pack(&["ls", "/sub"]).1, "a-link\nbig\ndeeper\nsym\n");
    let dst = env.host("from-host-pack");
    assert_eq!(on_pack(&["export", "/", dst.to_str().unwrap()]).0, 0);
    assert_same_tree(&src, &dst, xattrs);
    // Writes fail with EROFS and one line.
    let (code, _, err) = on_pack(&["mkdir", "/new"]);
    assert_eq!(code, libc::EROFS, "{err}");
    assert!(err.contains("read-only") && err.lines().count() == 1, "{err}");
    // Store -> pack -> export: the store URI is read at one snapshot.
    env.ok(&["import", src.to_str().unwrap(), "/"]);
    let img2 = env.host("store.pack");
    env.ok(&["pack", env.store().to_str().unwrap(), img2.to_str().unwrap()]);
    let dst2 = env.host("from-store-pack");
    let o = Command::new(BIN)
        .arg("--store")
        .arg(format!("pack:{}", img2.display()))
        .args(["export", "/", dst2.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_same_tree(&src, &dst2, xattrs);
    // A source that is neither a store nor a directory, and a damaged image.
    let (code, msg) =
        env.fails(&["pack", env.host("nothing").to_str().unwrap(), img2.to_str().unwrap()]);
    assert_eq!(code, libc::ENOENT, "{msg}");
    std::fs::write(&img2, b"not an image").unwrap();
    let o = Command::new(BIN)
        .arg("--store")
        .arg(format!("pack:{}", img2.display()))
        .args(["ls"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("corrupt pack image"), "{o:?}");
}

/// The size of the largest regular file the process `pid` has open under `dir` (or deleted
/// there: an `O_TMPFILE`), from `/proc/PID/fd`.
fn open_file_size_under(pid: u32, dir: &Path) -> u64 {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
    fds.flatten()
        .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t.starts_with(dir)))
        .filter_map(|fd| std::fs::metadata(fd.path()).ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .max()
        .unwrap_or(0)
}

#[test]
fn pack_killed_midway_leaves_the_old_image_in_place_and_nothing_else() {
    let env = Env::new();
    let src = env.host("many");
    let img = env.host("img.pack");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("first"), b"old image").unwrap();
    env.ok(&["pack", src.to_str().unwrap(), img.to_str().unwrap()]);
    let old = std::fs::read(&img).unwrap();
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(env.host(""))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let before = listing();
    // Grow the tree until a build lasts long enough to be killed while it writes.
    let mut files = 0;
    for round in 0..6 {
        let more = 5000 << round;
        for i in files..files + more {
            let d = src.join(format!("d{}", i / 1000));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(format!("f{i}")), vec![b'x'; i % 3000]).unwrap();
        }
        files += more;
        let mut child =
            env.cmd(&["pack", src.to_str().unwrap(), img.to_str().unwrap()]).spawn().unwrap();
        // Kill once the image being written (whatever its name, if any) has data in it.
        let started = std::time::Instant::now();
        while open_file_size_under(child.id(), &env.host("")) < 1 << 20
            && started.elapsed().as_secs() < 60
        {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // SAFETY: plain kill(2) of our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let status = child.wait().unwrap();
        if status.success() {
            // It finished first: start again with a larger tree.
            std::fs::write(&img, &old).unwrap();
            continue;
        }
        assert_eq!(std::fs::read(&img).unwrap(), old, "round {round}: the old image was changed");
        assert_eq!(listing(), before, "round {round}: the killed build left a file behind");
        let o = Command::new(BIN)
            .arg("--store")
            .arg(format!("pack:{}", img.display()))
            .args(["cat", "/first"])
            .output()
            .unwrap();
        assert_eq!(o.stdout, b"old image");
        // A new build succeeds, and replaces the image.
        env.ok(&["pack", src.to_str().unwrap(), img.to_str().unwrap()]);
        let o = Command::new(BIN)
            .arg("--store")
            .arg(format!("pack:{}", img.display()))
            .args(["ls", "/d0"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(o.stdout).unwrap().lines().count(), 1000);
        assert_eq!(listing(), before);
        return;
    }
    panic!("every build finished before it could be killed");
}
