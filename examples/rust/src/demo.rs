//! The txvfs demo: a multi-file transaction on the embedded RocksDB store, a conflict that is
//! detected and retried, and the files read back.
//!
//! Run: `cargo run --release -p txvfs-examples --bin demo [STORE_DIR]`

use std::cell::Cell;
use txvfs::{ErrorKind, FileSystem, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("txvfs-demo-{}", std::process::id())));
    let store = Store::open(&format!("rocksdb:{}", dir.display()))?;
    println!("opened {}", store.describe());

    // 1. One transaction writes several files: all of them appear at once, or none.
    store.transact(|tx| {
        tx.mkdir_all("/project/chapters", 0o755)?;
        tx.write_file("/project/chapters/01.md", b"# One\nIt begins.\n")?;
        tx.write_file("/project/chapters/02.md", b"# Two\nIt continues.\n")?;
        tx.write_file("/project/index.json", br#"{"chapters": 2}"#)
    })?;
    println!("committed 3 files in one transaction");

    // 2. A conflict: the transaction reads the index, then someone else changes it before the
    //    commit. The commit fails with a retryable conflict and `transact` runs it again.
    let attempts = Cell::new(0);
    store.transact(|tx| {
        attempts.set(attempts.get() + 1);
        let index = String::from_utf8(tx.read_file("/project/index.json")?).unwrap_or_default();
        if attempts.get() == 1 {
            // A concurrent writer commits first (auto-commit, outside our transaction).
            store.write_file("/project/index.json", br#"{"chapters": 2, "draft": true}"#)?;
        }
        tx.write_file("/project/chapters/03.md", b"# Three\nIt ends.\n")?;
        tx.write_file(
            "/project/index.json",
            index.replace("\"chapters\": 2", "\"chapters\": 3").as_bytes(),
        )
    })?;
    println!(
        "second transaction committed after {} attempts (conflict detected and retried)",
        attempts.get()
    );

    // 3. Read everything back.
    for e in store.readdir("/project/chapters", None, 0)? {
        let path = format!("/project/chapters/{}", String::from_utf8_lossy(&e.name));
        let st = store.stat(&path)?;
        println!(
            "{path} ({} bytes): {:?}",
            st.size,
            String::from_utf8_lossy(&store.read_file(&path)?)
        );
    }
    println!(
        "/project/index.json: {}",
        String::from_utf8_lossy(&store.read_file("/project/index.json")?)
    );

    // 4. Errors are values with an errno and a message naming the path.
    match store.rmdir("/project") {
        Err(e) if e.kind() == ErrorKind::NotEmpty => {
            println!("rmdir /project refused: {e} (errno {})", e.code())
        }
        other => return Err(format!("unexpected: {other:?}").into()),
    }
    let fs = store.statfs()?;
    println!("store holds {} inodes; done", fs.files);
    Ok(())
}
