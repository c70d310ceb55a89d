//! Packs: read-only images of a tree, built from a store snapshot or a host directory and
//! opened as a store with `pack:/path/image` (see `docs/design.md`, "Packed images").
//!
//! [`format`](mod@format) is the image layout, [`crc`] its checksum, [`build`] writes images,
//! [`read`] is the backend.

pub mod build;
pub mod crc;
pub mod format;
pub mod read;

pub use build::{pack_backend, pack_dir, pack_store, PackStats, ProgressFn};
pub use read::PackBackend;
