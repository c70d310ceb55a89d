//! Locks never lapse under a live holder on a shared RocksDB store: a failover held up for
//! longer than a lock's lease (another process holds the owner file's lock, so nobody can
//! become the owner for 12 s, more than the 10 s lease) while a live client holds a flock.
//! Afterwards no other process gets the lock; once its holder exits, another process does.
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use std::os::unix::io::AsRawFd;
use std::time::Duration;

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

/// How long the failover is held: more than a lock lease (`fs/leases.rs`, 10 s).
const HELD: Duration = Duration::from_secs(12);

#[test]
fn a_failover_longer_than_a_lease_keeps_a_live_holders_flock() {
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let mut owner = Agent::start(&uri, AGENT);
    assert_eq!(owner.role, "owner");
    let mut holder = Agent::start(&uri, AGENT);
    assert_eq!(holder.role, "client");
    assert_eq!(holder.ask("write /f data"), "ok");
    assert_eq!(holder.ask("flock /f"), "ok");

    // The owner dies, and this process takes the owner file's lock at once: nobody can take
    // over (the holder's lease renewals fail meanwhile) until it lets go.
    owner.kill();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(d.path().join("txvfs.owner"))
        .unwrap();
    // SAFETY: an all-zero flock is a valid value (the whole file); fd is open.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: fd is open; fl is a valid flock.
    let locked = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &mut fl) };
    assert_eq!(locked, 0, "another process took over before the test could hold the failover");
    std::thread::sleep(HELD);
    drop(file);

    // A new process (the new owner, or a client of the holder if it took over first) does not
    // get the lock: its holder is alive.
    let mut other = Agent::start(&uri, AGENT);
    assert_eq!(other.ask("read /f"), "data");
    let answer = other.ask("flock /f");
    assert!(answer.contains("locked"), "a live holder's flock was taken: {answer}");
    // The holder still has it, and its store works.
    assert_eq!(holder.ask("read /f"), "data");
    // Once the holder is gone (the kernel dropped its lock on txvfs.alive), the lock is free
    // at once: the first try gets it.
    holder.kill();
    let answer = other.ask("flock /f");
    assert_eq!(answer, "ok", "a dead holder's lock still counted");
}
