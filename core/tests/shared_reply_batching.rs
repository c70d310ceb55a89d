//! The owner's replies to requests a client sent together go out in one write. Alone in its
//! test binary: the count it reads (`kv::replies_sent`) is the whole process's, and the other
//! shared-store tests, run in parallel threads of one binary, served clients of their own
//! meanwhile (CI counted 4 writes where 2 were made).
#![cfg(feature = "rocksdb")]

mod agent;

use agent::Agent;
use txvfs::kv::{self, Role};
use txvfs::{FileSystem, Store};

#[test]
fn agent_main() {
    agent::agent_main();
}

const AGENT: &str = "agent_main";

#[test]
fn the_replies_to_requests_a_client_sent_together_come_in_one_write() {
    // A client's create of a new name is one round trip: its begin (BEGIN_AT) goes with the
    // commit (the name is taken as absent, the owner checks it). The owner wrote the begin's
    // reply and the commit's separately (2 writes per create; before names were guessed, the
    // begin went with the name's lookup and took 3): the client could wake twice for one
    // round trip. Each count is the least of three tries (the lease renewal thread makes
    // round trips of its own now and then).
    let d = tempfile::tempdir().unwrap();
    let uri = d.path().to_str().unwrap().to_string();
    let store = Store::open(&uri).unwrap(); // this process owns the store
    assert!(store.backend().role() != Role::Secondary);
    let mut client = Agent::start(&uri, AGENT);
    assert_eq!(client.role, "client");
    assert_eq!(client.ask("write /warm x"), "ok");
    let (mut writes, mut trips) = (u64::MAX, u64::MAX);
    for i in 0..3 {
        let (w0, t0) = (kv::replies_sent(), client.ask("trips").parse::<u64>().unwrap());
        assert_eq!(client.ask(&format!("write /new{i} data")), "ok");
        writes = writes.min(kv::replies_sent() - w0);
        trips = trips.min(client.ask("trips").parse::<u64>().unwrap() - t0);
    }
    assert_eq!(
        (trips, writes),
        (1, 1),
        "a create's round trips, and the owner's writes of replies"
    );
    assert_eq!(store.read_file("/new2").unwrap(), b"data");
}
