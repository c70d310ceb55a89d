//! Packs: read-only images of a tree, built from a store snapshot or a host directory and
//! opened as a store with `pack:/path/image` (see `docs/design.md`, "Packed images").
//!
//! [`format`](mod@format) is the image layout, [`crc`] its checksum, [`build`] writes images (`build_dir` from a host directory),
//! [`read`] is the backend.

pub mod build;
mod build_dir;
pub mod crc;
pub mod format;
pub mod read;
mod read_txn;

pub use build::{pack_backend, pack_store, PackStats, ProgressFn};
pub use build_dir::pack_dir;
pub use read::PackBackend;
