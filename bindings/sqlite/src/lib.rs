//! SQLite VFS plugin for txvfs.
