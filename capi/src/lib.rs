//! C ABI for txvfs. See `include/txvfs.h`.

/// Returns the library version as a static NUL-terminated string.
#[no_mangle]
pub extern "C" fn txvfs_version() -> *const std::os::raw::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
