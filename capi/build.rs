//! Gives the shared library a SONAME (`libtxvfs.so.MAJOR`), so programs linked against an
//! installed `libtxvfs.so` record the major version and keep working across compatible updates.
//! Only capi's own link line changes: dependencies (RocksDB) are not rebuilt.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let major =
        std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets CARGO_PKG_VERSION_MAJOR");
    if os == "linux" || os == "freebsd" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtxvfs.so.{major}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
