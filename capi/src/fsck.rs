//! The integrity check: `txvfs_fsck`.

use crate::boundary::{boundary, cstr, Fail, Out};
use std::ffi::{c_char, c_int};

/// What `txvfs_fsck` found.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct txvfs_fsck_report {
    /// Keys read.
    pub keys_read: u64,
    /// Problems found, repaired ones included (0: the store is clean).
    pub problems: u64,
    /// Problems repaired (with `repair`).
    pub repaired: u64,
    /// Length in bytes of the whole text report (what `txvfs fsck` prints), without the NUL.
    pub text_needed: u64,
}

/// Checks the store at `uri` key by key without opening it (opening would tidy up first), and
/// with `repair` non-zero fixes what has one safe answer. Run it while no one writes to the
/// store. The counts go to `*out`; the text report goes to `text` like `snprintf`: at most
/// `text_len - 1` bytes and a NUL (`text` may be NULL when `text_len` is 0;
/// `out->text_needed` says how much room the whole report needs).
/// Errors: -EINVAL (NULL `uri` or `out`, NULL `text` with a length, a URI that is not UTF-8),
/// -ENOENT (no store there: nothing is created), -EBUSY (the store is in use by another
/// process or library copy), -TXVFS_EBACKEND.
#[no_mangle]
pub unsafe extern "C" fn txvfs_fsck(
    uri: *const c_char,
    repair: c_int,
    text: *mut c_char,
    text_len: usize,
    out: *mut txvfs_fsck_report,
) -> c_int {
    boundary("txvfs_fsck", || {
        let uri = std::str::from_utf8(cstr(uri, "uri")?)
            .map_err(|_| Fail::invalid("uri is not UTF-8"))?;
        let out = Out::new(out, "out")?;
        if text.is_null() && text_len > 0 {
            return Err(Fail::invalid("argument `text` is NULL but `text_len` is not 0"));
        }
        let report = txvfs::fsck::check_uri(uri, repair != 0, &mut |_| {})?;
        let whole = report.to_string();
        if text_len > 0 {
            let n = whole.len().min(text_len - 1);
            // SAFETY: the caller gives `text_len` writable bytes at `text`.
            unsafe {
                std::ptr::copy_nonoverlapping(whole.as_ptr(), text.cast::<u8>(), n);
                *text.add(n) = 0;
            }
        }
        out.set(txvfs_fsck_report {
            keys_read: report.keys_read,
            problems: report.problems.len() as u64,
            repaired: report.repaired() as u64,
            text_needed: whole.len() as u64,
        });
        Ok(())
    })
}
