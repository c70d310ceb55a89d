//! `txvfs quota set|show|remove`: limits on a tree, EDQUOT (exit 122) naming the tree and
//! changing nothing, EXDEV for a move across trees, bad input, and fsck clean afterwards.

mod common;
use common::Env;

#[test]
fn quota_set_show_remove() {
    let env = Env::new().init();
    env.ok(&["mkdir", "-p", "/q/sub", "/o"]);
    assert_eq!(env.ok(&["quota", "show", "/q"]), "/q: in no quota tree\n");
    env.ok(&["quota", "set", "/q", "--bytes", "10", "--inodes", "3"]);
    let o = env.run_stdin(&["put", "-", "/q/sub/a"], b"0123456789");
    assert!(o.status.success());
    let show = env.ok(&["quota", "show", "/q/sub/a"]);
    let lines: Vec<Vec<&str>> = show.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["Tree", "Bytes", "Limit", "Inodes", "Limit"], "{show}");
    assert_eq!(lines[1], ["/q", "10", "10", "3", "3"], "{show}");
    // One byte more: EDQUOT (exit 122) naming the tree; the file is not there.
    let o = env.run_stdin(&["put", "-", "/q/b"], b"!");
    assert_eq!(o.status.code(), Some(libc::EDQUOT));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("txvfs: /q: disk quota exceeded"), "{err}");
    assert_eq!(env.fails(&["ls", "/q/b"]).0, libc::ENOENT);
    assert_eq!(env.fails(&["mkdir", "/q/d"]).0, libc::EDQUOT);
    // A move out of the tree is EXDEV.
    assert_eq!(env.fails(&["mv", "/q/sub/a", "/o/a"]).0, libc::EXDEV);
    // New limits; then remove.
    env.ok(&["quota", "set", "/q", "--bytes", "100"]);
    let show = env.ok(&["quota", "show", "/q"]);
    assert!(show.lines().nth(1).unwrap().split_whitespace().eq(["/q", "10", "100", "3", "-"]));
    env.ok(&["quota", "remove", "/q"]);
    assert_eq!(env.ok(&["quota", "show", "/q"]), "/q: in no quota tree\n");
    env.ok(&["mv", "/q/sub/a", "/o/a"]);
    assert_eq!(env.ok(&["fsck"]), "clean\n");
}

#[test]
fn quota_bad_input() {
    let env = Env::new().init();
    env.ok(&["mkdir", "/d"]);
    let o = env.run_stdin(&["put", "-", "/f"], b"x");
    assert!(o.status.success());
    let (code, msg) = env.fails(&["quota", "set", "/d"]);
    assert_eq!(
        (code, msg.as_str()),
        (libc::EINVAL, "txvfs: /d: a quota needs a byte limit or an inode limit\n")
    );
    assert_eq!(env.fails(&["quota", "set", "/d", "--bytes", "0"]).0, libc::EINVAL);
    assert_eq!(env.fails(&["quota", "set", "/f", "--bytes", "5"]).0, libc::ENOTDIR);
    assert_eq!(env.fails(&["quota", "set", "/nope", "--bytes", "5"]).0, libc::ENOENT);
    assert_eq!(env.fails(&["quota", "remove", "/d"]).0, libc::ENOENT);
    assert_eq!(env.fails(&["quota", "show", "/nope"]).0, libc::ENOENT);
    // Not a number: clap's usage error, exit 2.
    let o = env.run(&["quota", "set", "/d", "--bytes", "-1"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(env.ok(&["quota", "show", "/d"]), "/d: in no quota tree\n");
}
