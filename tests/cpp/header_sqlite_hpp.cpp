// The SQLite C++ header alone (it brings txvfs.hpp and sqlite3.h), and txvfs.hpp with it.
#include "txvfs_sqlite.hpp"
#include "txvfs.hpp"

int header_sqlite_hpp() { return sizeof(txvfs::sqlite::error) > 0; }
