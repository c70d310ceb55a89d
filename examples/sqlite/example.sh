#!/usr/bin/env bash
# SQLite's shell on txvfs: load the extension, open a database in a txvfs store, write.
#   examples/sqlite/example.sh PATH/TO/libtxvfs_sqlite.so STORE_DIR
set -euo pipefail
lib="${1%.so}"; store="$2"
sqlite3 -batch <<SQL
.load $lib
.open "file:/notes.db?vfs=txvfs&store=$store"
CREATE TABLE IF NOT EXISTS notes(id INTEGER PRIMARY KEY, body TEXT);
BEGIN;                                    -- one SQLite transaction = one txvfs transaction
INSERT INTO notes(body) VALUES ('written through txvfs');
INSERT INTO notes(body) VALUES ('atomic, no journal on disk');
COMMIT;
SELECT count(*) || ' notes' FROM notes;
PRAGMA integrity_check;
SQL
