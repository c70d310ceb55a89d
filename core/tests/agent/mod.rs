//! A second process for the multi-process tests: the test binary runs itself again as an
//! "agent" that opens a store and obeys commands on its stdin, one per line, answering each on
//! stdout after `@@ `: `set KEY VALUE` (one committed transaction; answers `ok` or the error), `get KEY`
//! (answers the value or `none`), `ring` (rings the store's bell, as a commit of a change feed
//! record does), `exit`, `close` (drops the store, a clean close, then
//! answers `ok` and exits once its stdin ends); and through the file system (a `Store` on the same
//! backend, opened at the first such command): `write PATH DATA`, `read PATH`, `open PATH`
//! (keeps one handle), `hread` (the handle's whole content), `hclose`, `unlink PATH`,
//! `fill PATH CHAR LEN` (writes a file of LEN bytes CHAR),
//! `flock PATH` (keeps a handle holding an exclusive flock), `unlock` (closes that handle),
//! `lockrange PATH START LEN` (keeps
//! a handle holding a write lock on those bytes), `snap` (takes an in-process
//! snapshot of the store and keeps it), `sread PATH` (reads through it), `sdrop` (drops it),
//! `named NAME` (creates a named snapshot), `engine-snapshots` (the owner's count of live
//! RocksDB snapshots), `hold KEY` (begins a transaction, reads KEY in it and keeps it open:
//! answers the value or `none`), `hcommit KEY VALUE` (sets KEY in the held transaction and
//! commits it), `recoveries` (how many times it looked for a new owner), `rwopen PATH` (keeps
//! one handle, read-write), `hlock START LEN` and `hunlock START LEN` (a write lock on those
//! bytes of the kept handle, without waiting, and its release), `trips` (this process's round
//! trips to the store's owner so far), `wal-syncs` (this process's fsyncs of a store's log so
//! far). It answers `ready owner` or `ready client` once open (`ready peer` on
//! an `fdb:` store).
//!
//! A test file using it declares `mod agent;` and one test named `agent_main` that calls
//! [`agent_main`], which does nothing unless the process is an agent.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use txvfs::kv::{self, Backend};

const ROLE: &str = "TXVFS_TEST_AGENT_URI";

/// The agent's body: runs only in an agent process, then exits.
pub fn agent_main() {
    let Ok(uri) = std::env::var(ROLE) else { return };
    if let Some(mask) =
        std::env::var("TXVFS_TEST_UMASK").ok().and_then(|m| u32::from_str_radix(&m, 8).ok())
    {
        // SAFETY: umask cannot fail.
        unsafe { libc::umask(mask as libc::mode_t) };
    }
    // A store option at the end of the URI (`&disk_cache=DIR`) is for the `Store` only.
    let raw_uri = uri.split("&disk_cache=").next().unwrap();
    let b: Arc<dyn Backend> = kv::open(raw_uri).unwrap_or_else(|e| {
        println!("@@ error {e}");
        std::process::exit(2)
    });
    // The store's directory (empty for FoundationDB).
    let canon = match uri.strip_prefix("fdb:") {
        Some(_) => std::path::PathBuf::new(),
        None => {
            let path = uri.strip_prefix("rocksdb:").unwrap_or(&uri);
            std::fs::canonicalize(path.split('?').next().unwrap()).unwrap()
        }
    };
    if uri.starts_with("fdb:") {
        println!("@@ ready peer"); // FoundationDB: no owner
    } else {
        #[cfg(feature = "rocksdb")]
        let owner = kv::SharedBackend::open(&canon, false).unwrap().is_owner();
        #[cfg(not(feature = "rocksdb"))]
        let owner = canon.as_os_str().is_empty();
        println!("@@ ready {}", if owner { "owner" } else { "client" });
    }
    let mut store: Option<txvfs::Store> = None;
    let mut handle: Option<txvfs::File> = None;
    let mut locked: Option<txvfs::File> = None;
    let mut snap: Option<txvfs::Store> = None;
    let mut ranges: Vec<txvfs::File> = Vec::new();
    let mut held: Option<Box<dyn kv::Txn>> = None;
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        let answer = match words.as_slice() {
            ["set", k, v] => {
                let r = b.begin().and_then(|mut t| {
                    t.set(k.as_bytes(), v.as_bytes())?;
                    t.commit(false)
                });
                match r {
                    Ok(()) => "ok".to_string(),
                    Err(e) => format!("error {e}"),
                }
            }
            ["get", k] => match b.begin().and_then(|mut t| t.get(k.as_bytes())) {
                Ok(Some(v)) => String::from_utf8_lossy(&v).into_owned(),
                Ok(None) => "none".into(),
                Err(e) => format!("error {e}"),
            },
            ["hold", k] => match b.begin().and_then(|mut t| Ok((t.get(k.as_bytes())?, t))) {
                Ok((v, t)) => {
                    held = Some(t);
                    v.map(|v| String::from_utf8_lossy(&v).into_owned()).unwrap_or("none".into())
                }
                Err(e) => format!("error {e}"),
            },
            ["hcommit", k, v] => match held.take() {
                Some(mut t) => {
                    match t.set(k.as_bytes(), v.as_bytes()).and_then(|()| t.commit(false)) {
                        Ok(()) => "ok".to_string(),
                        Err(e) => format!("error {:?} {e}", e.kind()),
                    }
                }
                None => "error no held transaction".into(),
            },
            ["ring"] => {
                // As after a commit that wrote a change feed record: rings the store's bell.
                b.announce_stamped(b"F");
                "ok".to_string()
            }
            ["exit"] => std::process::exit(0),
            ["close"] => {
                drop((snap.take(), std::mem::take(&mut ranges), handle.take(), locked.take()));
                drop(store.take());
                println!("@@ ok");
                std::io::stdout().flush().unwrap();
                drop(b);
                // SAFETY: ends this process without running the test harness further.
                unsafe { libc::_exit(0) }
            }
            [cmd, rest @ ..] => {
                use txvfs::FileSystem;
                if store.is_none() {
                    match txvfs::Store::open(&uri) {
                        Ok(s) => store = Some(s),
                        Err(e) => {
                            println!("@@ error open: {e}");
                            std::io::stdout().flush().unwrap();
                            continue;
                        }
                    }
                }
                let s = store.as_ref().expect("opened above");
                let shown = |r: txvfs::Result<Vec<u8>>| match r {
                    Ok(d) => String::from_utf8_lossy(&d).into_owned(),
                    Err(e) => format!("error {e}"),
                };
                let done = |r: txvfs::Result<()>| shown(r.map(|()| b"ok".to_vec()));
                match (*cmd, rest) {
                    ("write", [p, d]) => done(s.write_file(p, d.as_bytes())),
                    ("fill", [p, c, n]) => {
                        done(s.write_file(p, &c.repeat(n.parse().unwrap()).into_bytes()))
                    }
                    ("unlock", []) => done(locked.take().map(|f| f.close()).unwrap_or(Ok(()))),
                    ("read", [p]) => shown(s.read_file(p)),
                    ("unlink", [p]) => done(s.unlink(p)),
                    ("mkdir", [p]) => done(s.mkdir(p, 0o755)),
                    ("rename", [a, b]) => done(s.rename(a, b)),
                    ("size", [p]) => shown(s.stat(p).map(|st| st.size.to_string().into_bytes())),
                    ("open", [p]) => done(
                        s.open(p, &txvfs::OpenOptions::new().read(true)).map(|f| handle = Some(f)),
                    ),
                    ("hread", []) => shown(
                        handle
                            .as_ref()
                            .ok_or_else(|| txvfs::Error::new(txvfs::ErrorKind::BadHandle, "none"))
                            .and_then(|f| {
                                let mut buf = vec![0u8; 1 << 16];
                                let n = f.read_at(&mut buf, 0)?;
                                buf.truncate(n);
                                Ok(buf)
                            }),
                    ),
                    ("lockrange", [p, start, len]) => {
                        let rw = txvfs::OpenOptions::new().read(true).write(true);
                        done(s.open(p, &rw).and_then(|f| {
                            let (start, len) = (start.parse().unwrap(), len.parse().unwrap());
                            f.lock_range(txvfs::RangeLockKind::Write, start, len, false)?;
                            ranges.push(f);
                            Ok(())
                        }))
                    }
                    ("snap", []) => done(s.snapshot().map(|v| snap = Some(v))),
                    ("sread", [p]) => match &snap {
                        Some(v) => shown(v.read_file(p)),
                        None => "error no snapshot".into(),
                    },
                    ("sdrop", []) => {
                        snap = None;
                        "ok".into()
                    }
                    ("named", [n]) => done(s.create_named_snapshot(n)),
                    #[cfg(feature = "rocksdb")]
                    ("engine-snapshots", []) => {
                        match kv::SharedBackend::open(&canon, false).unwrap().engine_snapshots() {
                            Some(n) => n.to_string(),
                            None => "error not the owner".into(),
                        }
                    }
                    #[cfg(feature = "rocksdb")]
                    ("recoveries", []) => {
                        kv::SharedBackend::open(&canon, false).unwrap().recoveries().to_string()
                    }
                    ("rwopen", [p]) => done(
                        s.open(p, &txvfs::OpenOptions::new().read(true).write(true))
                            .map(|f| handle = Some(f)),
                    ),
                    ("hlock" | "hunlock", [start, len]) => {
                        let kind = match *cmd {
                            "hlock" => txvfs::RangeLockKind::Write,
                            _ => txvfs::RangeLockKind::Unlock,
                        };
                        let (start, len) = (start.parse().unwrap(), len.parse().unwrap());
                        done(match &handle {
                            Some(f) => f.lock_range(kind, start, len, false),
                            None => Err(txvfs::Error::new(txvfs::ErrorKind::BadHandle, "none")),
                        })
                    }
                    #[cfg(feature = "rocksdb")]
                    ("trips", []) => kv::round_trips().to_string(),
                    #[cfg(feature = "rocksdb")]
                    ("wal-syncs", []) => kv::wal_syncs().to_string(),
                    ("hclose", []) => done(handle.take().map(|f| f.close()).unwrap_or(Ok(()))),
                    ("flock", [p]) => {
                        done(s.open(p, &txvfs::OpenOptions::new().read(true)).and_then(|f| {
                            f.flock(txvfs::FlockOp::Exclusive, false)?;
                            locked = Some(f);
                            Ok(())
                        }))
                    }
                    _ => format!("error unknown command {line:?}"),
                }
            }
            _ => format!("error unknown command {line:?}"),
        };
        println!("@@ {answer}");
        std::io::stdout().flush().unwrap();
    }
    std::process::exit(0);
}

/// A running agent; killed (SIGKILL) when dropped.
pub struct Agent {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// `owner` or `client`, as the agent reported once open.
    pub role: String,
}

impl Agent {
    /// Starts an agent on `uri` from the test binary's test `test_path` (the full name of the
    /// test that calls [`agent_main`]) and waits until it has the store open.
    pub fn start(uri: &str, test_path: &str) -> Agent {
        Agent::try_start(uri, test_path)
            .unwrap_or_else(|e| panic!("agent did not open the store: {e}"))
    }

    /// [`Agent::start`], or the agent's first answer when it could not open the store.
    pub fn try_start(uri: &str, test_path: &str) -> Result<Agent, String> {
        Agent::try_start_cmd(Command::new(std::env::current_exe().unwrap()), uri, test_path)
    }

    /// [`Agent::try_start`] running `cmd`, a command of this test binary (or a copy of it),
    /// set up by the caller: its environment (`TXVFS_TEST_UMASK`: the agent's umask, octal),
    /// its user.
    pub fn try_start_cmd(mut cmd: Command, uri: &str, test_path: &str) -> Result<Agent, String> {
        let mut child = cmd
            .args(["--exact", test_path, "--nocapture", "--test-threads=1", "-q"])
            .env(ROLE, uri)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut agent = Agent { child, stdin, stdout, role: String::new() };
        let first = agent.read_line();
        agent.role = first.strip_prefix("ready ").ok_or_else(|| first.clone())?.to_string();
        Ok(agent)
    }

    fn read_line(&mut self) -> String {
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line).unwrap() == 0 {
                panic!("agent exited");
            }
            // The test harness prints its own lines ("running 1 test" ...): skip them.
            if let Some(answer) = line.trim_end().strip_prefix("@@ ") {
                return answer.to_string();
            }
        }
    }

    /// Sends one command and returns the answer.
    pub fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        self.read_line()
    }

    /// The answer to a command sent with [`Agent::send`].
    pub fn answer(&mut self) -> String {
        self.read_line()
    }

    /// Sends one command without waiting for its answer (to an agent that may be stopped).
    pub fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The agent's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the agent with SIGKILL and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
    }
}
