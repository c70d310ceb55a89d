//! Runs the shared POSIX-semantics table `tests/cases/posix.cases` (its format is documented at
//! the top of that file) through the Rust API, every case on a fresh store: once on the memory
//! backend, once on it with a local disk cache, and once on RocksDB. All mismatches are
//! collected and reported together.

use std::path::PathBuf;
use txvfs::{Error, FileSystem, FileType, OpenOptions, RenameFlags, Store, XattrFlags};

/// One line of a case: `OP ARG... => EXPECT`.
struct Step {
    line: usize,
    op: String,
    args: Vec<String>,
    expect: String,
}

struct Case {
    name: String,
    steps: Vec<Step>,
}

fn parse(text: &str) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() || raw.starts_with('#') {
            continue;
        }
        if let Some(name) = raw.strip_prefix("case ") {
            cases.push(Case { name: name.trim().to_string(), steps: Vec::new() });
            continue;
        }
        let (lhs, expect) = raw
            .rsplit_once(" => ")
            .unwrap_or_else(|| panic!("posix.cases line {line}: missing ' => ': {raw:?}"));
        let mut fields = lhs.split(' ').map(str::to_string);
        let op = fields.next().unwrap();
        let case = cases
            .last_mut()
            .unwrap_or_else(|| panic!("posix.cases line {line}: step before any case"));
        case.steps.push(Step { line, op, args: fields.collect(), expect: expect.to_string() });
    }
    cases
}

/// Expands `{N:UNIT}` repetitions, then decodes `-` (empty), `\0` and `\\`.
fn decode(s: &str) -> Vec<u8> {
    let mut expanded = String::new();
    let mut rest = s;
    while let Some(open) = rest.find('{') {
        let close = rest[open..].find('}').map(|c| open + c);
        let rep = close.and_then(|close| {
            let (n, unit) = rest[open + 1..close].split_once(':')?;
            Some((n.parse::<usize>().ok()?, unit, close))
        });
        match rep {
            Some((n, unit, close)) => {
                expanded.push_str(&rest[..open]);
                expanded.push_str(&unit.repeat(n));
                rest = &rest[close + 1..];
            }
            None => {
                expanded.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
            }
        }
    }
    expanded.push_str(rest);
    if expanded == "-" {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut bytes = expanded.bytes();
    while let Some(b) = bytes.next() {
        if b == b'\\' {
            match bytes.next() {
                Some(b'0') => out.push(0),
                Some(b'\\') => out.push(b'\\'),
                other => panic!("bad escape \\{:?} in {s:?}", other.map(char::from)),
            }
        } else {
            out.push(b);
        }
    }
    out
}

/// Bytes for a report: escapes as in the table, long runs of one byte shortened to `{N:c}`.
fn show(v: &[u8]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    let unit = |b: u8| match b {
        0 => "\\0".to_string(),
        b'\\' => "\\\\".to_string(),
        b if b.is_ascii_graphic() => (b as char).to_string(),
        b => format!("\\x{b:02x}"),
    };
    let mut out = String::new();
    let mut i = 0;
    while i < v.len() {
        let run = v[i..].iter().take_while(|&&b| b == v[i]).count();
        if run > 8 {
            out.push_str(&format!("{{{run}:{}}}", unit(v[i])));
        } else {
            (0..run).for_each(|_| out.push_str(&unit(v[i])));
        }
        i += run;
    }
    if out.len() > 300 {
        out.truncate(300);
        out.push_str("...");
    }
    out
}

fn errno_name(code: i32) -> Option<&'static str> {
    ERRNOS.iter().find(|(_, c)| *c == code).map(|(n, _)| *n)
}

const ERRNOS: &[(&str, i32)] = &[
    ("ENOENT", libc::ENOENT),
    ("EEXIST", libc::EEXIST),
    ("ENOTDIR", libc::ENOTDIR),
    ("EISDIR", libc::EISDIR),
    ("ENOTEMPTY", libc::ENOTEMPTY),
    ("EINVAL", libc::EINVAL),
    ("ELOOP", libc::ELOOP),
    ("ENAMETOOLONG", libc::ENAMETOOLONG),
    ("EPERM", libc::EPERM),
    ("EACCES", libc::EACCES),
    ("EBUSY", libc::EBUSY),
    ("ENODATA", libc::ENODATA),
    ("EBADF", libc::EBADF),
    ("EXDEV", libc::EXDEV),
    ("ENOSPC", libc::ENOSPC),
    ("EROFS", libc::EROFS),
    ("ERANGE", libc::ERANGE),
    ("EFBIG", libc::EFBIG),
    ("E2BIG", libc::E2BIG),
    ("EAGAIN", libc::EAGAIN),
    ("EDEADLK", libc::EDEADLK),
];

fn list(mut names: Vec<Vec<u8>>) -> Vec<u8> {
    names.sort();
    names.join(&b","[..])
}

fn octal(s: &str) -> u32 {
    u32::from_str_radix(s, 8).unwrap_or_else(|_| panic!("bad octal mode {s:?}"))
}

fn num(s: &str) -> u64 {
    s.parse().unwrap_or_else(|_| panic!("bad number {s:?}"))
}

/// Runs one step: `Ok(None)` for a successful action, `Ok(Some(value))` for a query.
fn run(fs: &Store, op: &str, a: &[String]) -> Result<Option<Vec<u8>>, Error> {
    let arg = |i: usize| -> Vec<u8> {
        decode(a.get(i).unwrap_or_else(|| panic!("{op}: missing argument {}", i + 1)))
    };
    let want = |n: usize| assert_eq!(a.len(), n, "{op} takes {n} arguments");
    let none = |r: Result<(), Error>| r.map(|()| None);
    let some = |v: Vec<u8>| Ok(Some(v));
    match op {
        "mkdir" => {
            want(2);
            none(fs.mkdir(arg(0), octal(&a[1])))
        }
        "rmdir" => {
            want(1);
            none(fs.rmdir(arg(0)))
        }
        "write" => {
            want(2);
            none(fs.write_file(arg(0), &arg(1)))
        }
        "append" => {
            want(2);
            let f = fs.open(arg(0), &OpenOptions::new().append(true).create(true))?;
            f.write(&arg(1))?;
            none(f.close())
        }
        "pwrite" => {
            want(3);
            let f = fs.open(arg(0), &OpenOptions::new().write(true))?;
            f.write_at(&arg(2), num(&a[1]))?;
            none(f.close())
        }
        "read" => {
            want(1);
            let f = fs.open(arg(0), &OpenOptions::new().read(true))?;
            let mut data = Vec::new();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = f.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                data.extend_from_slice(&buf[..n]);
            }
            f.close()?;
            some(data)
        }
        "size" => {
            want(1);
            some(fs.stat(arg(0))?.size.to_string().into_bytes())
        }
        "type" => {
            want(1);
            let t = match fs.lstat(arg(0))?.kind {
                FileType::File => "file",
                FileType::Dir => "dir",
                FileType::Symlink => "symlink",
                _ => "special",
            };
            some(t.as_bytes().to_vec())
        }
        "nlink" => {
            want(1);
            some(fs.stat(arg(0))?.nlink.to_string().into_bytes())
        }
        "mode" => {
            want(1);
            some(format!("{:o}", fs.stat(arg(0))?.mode & 0o7777).into_bytes())
        }
        "unlink" => {
            want(1);
            none(fs.unlink(arg(0)))
        }
        "rename" => {
            want(2);
            none(fs.rename(arg(0), arg(1)))
        }
        "rename_noreplace" => {
            want(2);
            none(fs.rename_with(arg(0), arg(1), RenameFlags { no_replace: true, exchange: false }))
        }
        "rename_exchange" => {
            want(2);
            none(fs.rename_with(arg(0), arg(1), RenameFlags { no_replace: false, exchange: true }))
        }
        "link" => {
            want(2);
            none(fs.link(arg(0), arg(1)))
        }
        "symlink" => {
            want(2);
            none(fs.symlink(arg(0), arg(1)))
        }
        "readlink" => {
            want(1);
            some(fs.readlink(arg(0))?)
        }
        "truncate" => {
            want(2);
            none(fs.truncate(arg(0), num(&a[1])))
        }
        "create_excl" => {
            want(1);
            let f =
                fs.open(arg(0), &OpenOptions::new().write(true).create_new(true).mode(0o644))?;
            none(f.close())
        }
        "open_read" => {
            want(1);
            none(fs.open(arg(0), &OpenOptions::new().read(true))?.close())
        }
        "open_write" => {
            want(1);
            none(fs.open(arg(0), &OpenOptions::new().write(true))?.close())
        }
        "chmod" => {
            want(2);
            none(fs.chmod(arg(0), octal(&a[1])))
        }
        "setxattr" | "setxattr_create" | "setxattr_replace" => {
            want(3);
            let flags = match op {
                "setxattr" => XattrFlags::Any,
                "setxattr_create" => XattrFlags::Create,
                _ => XattrFlags::Replace,
            };
            none(fs.setxattr(arg(0), arg(1), &arg(2), flags))
        }
        "getxattr" => {
            want(2);
            some(fs.getxattr(arg(0), arg(1))?)
        }
        "removexattr" => {
            want(2);
            none(fs.removexattr(arg(0), arg(1)))
        }
        "listxattr" => {
            want(1);
            some(list(fs.listxattr(arg(0))?))
        }
        "ls" => {
            want(1);
            some(list(
                fs.readdir(arg(0), None, 0)?.into_iter().map(|e| e.name.into_vec()).collect(),
            ))
        }
        "exists" => {
            want(1);
            some(fs.exists(arg(0))?.to_string().into_bytes())
        }
        _ => panic!("unknown op {op:?}"),
    }
}

/// Checks one outcome against the expectation; `None` when it matches, else what happened.
fn check(expect: &str, got: &Result<Option<Vec<u8>>, Error>) -> Option<String> {
    let actual = match got {
        Ok(None) => "ok".to_string(),
        Ok(Some(v)) => show(v),
        Err(e) => match errno_name(e.code()) {
            Some(n) => format!("{n} ({e})"),
            None => format!("error code {} ({e})", e.code()),
        },
    };
    let matches = if ERRNOS.iter().any(|(n, _)| *n == expect) {
        matches!(got, Err(e) if errno_name(e.code()) == Some(expect))
    } else if expect == "ok" {
        matches!(got, Ok(None))
    } else {
        matches!(got, Ok(Some(v)) if *v == decode(expect))
    };
    (!matches).then_some(actual)
}

fn cases() -> Vec<Case> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/cases/posix.cases");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let cases = parse(&text);
    assert!(cases.len() >= 60, "only {} cases in {}", cases.len(), path.display());
    cases
}

fn run_all(backend: &str, mut open: impl FnMut() -> (Store, Option<tempfile::TempDir>)) {
    let cases = cases();
    let mut failures = Vec::new();
    let mut steps = 0;
    for case in &cases {
        let (store, dir) = open();
        for s in &case.steps {
            steps += 1;
            let got = run(&store, &s.op, &s.args);
            if let Some(actual) = check(&s.expect, &got) {
                failures.push(format!(
                    "  {} (line {}): {} {} => expected {}, got {}",
                    case.name,
                    s.line,
                    s.op,
                    s.args.iter().map(|a| show(&decode(a))).collect::<Vec<_>>().join(" "),
                    s.expect,
                    actual
                ));
            }
        }
        drop(store); // close the store before its directory goes
        drop(dir);
    }
    eprintln!("{backend}: {} cases, {steps} steps, {} failures", cases.len(), failures.len());
    assert!(
        failures.is_empty(),
        "{} of {steps} steps failed on {backend}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn posix_cases_memory() {
    run_all("memory", || (Store::open("memory:").unwrap(), None));
}

/// The memory backend through a small local disk cache (`?disk_cache=DIR`): every block is a
/// chunk read through the cache.
#[test]
fn posix_cases_disk_cache() {
    run_all("memory with a disk cache", || {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&format!(
            "memory:?disk_cache={}&disk_cache_size=1000000",
            dir.path().display()
        ))
        .unwrap();
        (store, Some(dir))
    });
}

/// The memory backend behind `FaultyBackend` batching reads, as FoundationDB does (path
/// resolution reads ahead, `fs/ops/prefetch.rs`).
#[test]
fn posix_cases_batched_reads() {
    run_all("memory with batched reads", || {
        let (b, plan) = txvfs::kv::FaultyBackend::new(std::sync::Arc::new(
            txvfs::kv::MemoryBackend::new(txvfs::kv::Limits::UNLIMITED),
        ));
        plan.set_parallel_reads(8);
        (Store::with_backend(b, txvfs::Options::default(), None).unwrap(), None)
    });
}

#[test]
fn posix_cases_rocksdb() {
    run_all("rocksdb", || {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("db").to_str().unwrap()).unwrap();
        (store, Some(dir))
    });
}

/// Runs only against a live cluster: `tests/foundationdb/run` starts one and runs this with
/// `--ignored` and `TXVFS_FDB_CLUSTER_FILE` set. Each case gets a fresh prefix in the cluster.
#[test]
#[ignore = "needs a FoundationDB cluster: tests/foundationdb/run"]
fn posix_cases_foundationdb() {
    let cluster = std::env::var("TXVFS_FDB_CLUSTER_FILE")
        .expect("the FoundationDB tests need a cluster: run tests/foundationdb/run");
    let run =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let next = std::sync::atomic::AtomicU32::new(0);
    run_all("foundationdb", || {
        let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        (Store::open(&format!("fdb:{cluster}?prefix=posix-{run}-{n}")).unwrap(), None)
    });
}

#[test]
fn decode_and_show() {
    assert_eq!(decode("-"), b"");
    assert_eq!(decode("a\\0b\\\\"), b"a\0b\\");
    assert_eq!(decode("/{3:a}x{2:\\0}"), b"/aaax\0\0");
    assert_eq!(show(&decode("{20:\\0}ab")), "{20:\\0}ab");
}
