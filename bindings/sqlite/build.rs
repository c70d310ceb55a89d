//! Compiles `src/host.c` (weak references to the host's SQLite) with the system C compiler.
//! No `cc` crate: a new build-dependency could change the feature set of RocksDB's build.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/host.c");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let obj = out.join("host.o");
    let st = Command::new(&cc)
        .args(["-c", "-fPIC", "-O2", "-Wall", "src/host.c", "-o"])
        .arg(&obj)
        .status()
        .expect("running the C compiler");
    assert!(st.success(), "compiling src/host.c failed");
    let lib = out.join("libtxvfs_sqlite_host.a");
    let _ = std::fs::remove_file(&lib);
    let st = Command::new("ar").arg("crs").arg(&lib).arg(&obj).status().expect("running ar");
    assert!(st.success(), "ar failed");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=txvfs_sqlite_host");
}
