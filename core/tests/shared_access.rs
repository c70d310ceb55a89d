//! Who a store's owner serves: exactly the processes that may write the store directory (and
//! root), on both kinds of socket (`kv/shared/access.rs`), tried with a second user (uid
//! 65534, as which a copy of this test binary runs). A process of another user that may not
//! write the directory is refused with the rule named, whatever the socket file's mode (the
//! owner runs with umask 0 here); one that may (the directory is its own) is served, also by
//! an owner of another user (root).
//!
//! Needs root, to run a process as another user. Without root each test says SKIPPED on
//! stderr and passes, unless `TXVFS_OTHER_USER_REQUIRE` is set (`.ci/run` sets it), where it
//! fails.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";
const OTHER: u32 = 65534;

/// In a process started by [`raw_hello`]: connects to the socket named by
/// `TXVFS_TEST_RAW_HELLO` (a path, or `@NAME` for an abstract socket), says hello and prints
/// the reply (`@@ ok`, or `@@ error MESSAGE`), then exits.
#[test]
fn raw_hello_main() {
    let Ok(at) = std::env::var("TXVFS_TEST_RAW_HELLO") else { return };
    let s = match at.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name).unwrap();
            UnixStream::connect_addr(&addr)
        }
        None => UnixStream::connect(&at),
    };
    let answer = match s {
        Err(e) => format!("error connect: {e}"),
        Ok(mut s) => {
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut hello = 9u32.to_le_bytes().to_vec();
            hello.push(1); // HELLO
            hello.extend_from_slice(&1u64.to_le_bytes()); // protocol version
            let _ = s.write_all(&hello);
            // The reply frame (an error reply closes the connection after it).
            let mut reply = vec![0u8; 4];
            let _ = s.read_exact(&mut reply);
            let len = u32::from_le_bytes(reply[..4].try_into().unwrap()) as usize;
            reply.resize(4 + len.min(1 << 16), 0);
            let _ = s.read_exact(&mut reply[4..]);
            match reply.get(4) {
                Some(100) => "ok".to_string(),
                Some(101) => format!("error {}", String::from_utf8_lossy(&reply[5 + 8 + 4..])),
                _ => format!("error reply {reply:?}"),
            }
        }
    };
    println!("@@ {answer}");
    std::process::exit(0);
}

/// Whether this process can run another as uid 65534; says SKIPPED loudly when not (or fails
/// when `TXVFS_OTHER_USER_REQUIRE` is set).
fn other_user_possible(test: &str) -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let why = format!("{test}: SKIPPED: needs root, to run a process as another user");
    assert!(
        std::env::var_os("TXVFS_OTHER_USER_REQUIRE").is_none(),
        "{why}, and TXVFS_OTHER_USER_REQUIRE is set"
    );
    eprintln!("\n********\n{why}\n********\n");
    false
}

/// A directory all may search, holding a copy of this test binary that all may run (the
/// build's own directory may be closed to other users).
fn binary_for_others(root: &Path) -> PathBuf {
    let exe = root.join("bin");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    exe
}

fn as_other(exe: &Path) -> Command {
    let mut c = Command::new(exe);
    c.uid(OTHER).gid(OTHER);
    c
}

/// The reply of the owner to a hello from a process of the other user, on the store's
/// socket (the file, or the abstract name in the owner file).
fn raw_hello(exe: &Path, dir: &Path) -> String {
    let owner = std::fs::read_to_string(dir.join("txvfs.owner")).unwrap();
    let at = match owner.split_whitespace().nth(2) {
        Some(name) => name.to_string(),
        None => dir.join("txvfs.sock").to_str().unwrap().to_string(),
    };
    let out = as_other(exe)
        .args(["--exact", "raw_hello_main", "--nocapture", "--test-threads=1", "-q"])
        .env("TXVFS_TEST_RAW_HELLO", &at)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("@@ "))
        .unwrap_or_else(|| panic!("no answer: {text} {}", String::from_utf8_lossy(&out.stderr)))
        .to_string()
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn chown(p: &Path, uid: u32) {
    std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap();
}

/// An owner agent (this user, root), with umask 0 (a socket file any user could connect to,
/// were its mode the rule), on the socket kind `abstract_socket` says.
fn owner(uri: &str, abstract_socket: bool) -> Agent {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env("TXVFS_TEST_UMASK", "0");
    if abstract_socket {
        cmd.env("TXVFS_SOCKET", "abstract");
    }
    let a = Agent::try_start_cmd(cmd, uri, AGENT).unwrap();
    assert_eq!(a.role, "owner");
    a
}

fn the_rule_holds(abstract_socket: bool) {
    let root = tempfile::tempdir().unwrap();
    chmod(root.path(), 0o755);
    let exe = binary_for_others(root.path());

    // A store directory of this user that the other may not write: refused, saying why.
    let dir = root.path().join("mine");
    std::fs::create_dir(&dir).unwrap();
    chmod(&dir, 0o755);
    let uri = dir.to_str().unwrap().to_string();
    let mut o = owner(&uri, abstract_socket);
    assert_eq!(o.ask("set k v"), "ok");
    let answer = raw_hello(&exe, &dir);
    assert!(
        answer.starts_with("error"),
        "a process that may not write the store directory was served"
    );
    assert!(answer.contains("may not write"), "{answer}");
    // Once the directory is the other user's to write, the same process is served.
    chmod(&dir, 0o777);
    assert_eq!(raw_hello(&exe, &dir), "ok");
    drop(o);

    // A store of the other user's own, whose owner is a process of this user (root): the
    // other user's processes are its clients.
    let dir = root.path().join("theirs");
    std::fs::create_dir(&dir).unwrap();
    chown(&dir, OTHER);
    chmod(&dir, 0o755);
    let uri = dir.to_str().unwrap().to_string();
    let mut first = Agent::try_start_cmd(as_other(&exe), &uri, AGENT).unwrap();
    assert_eq!(first.role, "owner");
    assert_eq!(first.ask("set k mine"), "ok");
    assert_eq!(first.ask("close"), "ok");
    drop(first);
    let mut o = owner(&uri, abstract_socket);
    let mut theirs = Agent::try_start_cmd(as_other(&exe), &uri, AGENT)
        .unwrap_or_else(|e| panic!("the directory's own user was not served: {e}"));
    assert_eq!(theirs.role, "client");
    assert_eq!(theirs.ask("get k"), "mine");
    assert_eq!(theirs.ask("set k2 theirs"), "ok");
    assert_eq!(o.ask("get k2"), "theirs");
}

#[test]
fn the_socket_file_serves_exactly_who_may_write_the_store_directory() {
    if other_user_possible("the_socket_file_serves_exactly_who_may_write_the_store_directory") {
        the_rule_holds(false);
    }
}

#[test]
fn the_abstract_socket_serves_exactly_who_may_write_the_store_directory() {
    if other_user_possible("the_abstract_socket_serves_exactly_who_may_write_the_store_directory") {
        the_rule_holds(true);
    }
}
