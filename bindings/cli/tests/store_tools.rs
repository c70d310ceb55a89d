//! The CLI's store tools against temporary RocksDB stores: fsck (finding and repairing damage),
//! snapshots and clones, and pack images.

mod common;
use common::{assert_same_tree, ino_of, make_tree, Env, BIN};
use std::path::Path;
use std::process::Command;

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
