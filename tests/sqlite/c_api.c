/* A C program using SQLite's C API with txvfs registered statically: linked against the
 * system libsqlite3 and libtxvfs_sqlite, it calls txvfs_sqlite_register (the SQLITE_EXTRA_INIT
 * shape), which finds the program's SQLite without carrying its own.
 *
 *     c_api STORE_DIR */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int txvfs_sqlite_register(const char *);
int txvfs_sqlite_register_default(const char *);

static int checks = 0;
#define CHECK(c) do { checks++; if (!(c)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static void exec(sqlite3 *db, const char *sql) {
    char *err = 0;
    if (sqlite3_exec(db, sql, 0, 0, &err) != SQLITE_OK) {
        fprintf(stderr, "%s: %s\n", sql, err);
        exit(1);
    }
}

static long long one(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, sql, -1, &st, 0) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static void integrity(sqlite3 *db) {
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, 0) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    CHECK(strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0);
    sqlite3_finalize(st);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: c_api STORE_DIR\n"); return 2; }
    char uri[4096];

    /* Registration is idempotent and survives sqlite3_shutdown. */
    CHECK(txvfs_sqlite_register(0) == SQLITE_OK);
    CHECK(txvfs_sqlite_register(0) == SQLITE_OK);
    CHECK(sqlite3_vfs_find("txvfs") != 0);
    CHECK(sqlite3_vfs_find(0) != sqlite3_vfs_find("txvfs"));
    CHECK(sqlite3_shutdown() == SQLITE_OK);
    CHECK(sqlite3_initialize() == SQLITE_OK);
    CHECK(txvfs_sqlite_register(0) == SQLITE_OK);

    sqlite3 *db;
    snprintf(uri, sizeof uri, "file:/c/app.db?store=%s", argv[1]);
    CHECK(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, "txvfs") == SQLITE_OK);
    exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
             "BEGIN; WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<1000) "
             "INSERT INTO t(v) SELECT printf('v%d', i) FROM c; COMMIT;");
    sqlite3_stmt *ins;
    CHECK(sqlite3_prepare_v2(db, "INSERT INTO t(v) VALUES (?)", -1, &ins, 0) == SQLITE_OK);
    for (int i = 0; i < 50; i++) {      /* 50 auto-commit transactions */
        sqlite3_bind_text(ins, 1, "bound", -1, SQLITE_STATIC);
        CHECK(sqlite3_step(ins) == SQLITE_DONE);
        sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
    CHECK(one(db, "SELECT count(*) FROM t") == 1050);
    integrity(db);

    /* The VFS's last error is reachable through sqlite3_system_errno after a failure. */
    sqlite3 *bad;
    snprintf(uri, sizeof uri, "file:/c/missing/none.db?store=%s&mode=ro", argv[1]);
    CHECK(sqlite3_open_v2(uri, &bad, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, "txvfs") == SQLITE_CANTOPEN);
    CHECK(sqlite3_system_errno(bad) == 2 /* ENOENT */);
    sqlite3_close(bad);
    CHECK(sqlite3_close(db) == SQLITE_OK);

    /* As the default VFS, with the store from TXVFS_SQLITE_STORE. */
    CHECK(txvfs_sqlite_register_default(0) == SQLITE_OK);
    CHECK(sqlite3_vfs_find(0) == sqlite3_vfs_find("txvfs"));
    setenv("TXVFS_SQLITE_STORE", argv[1], 1);
    CHECK(sqlite3_open("/c/app.db", &db) == SQLITE_OK);
    CHECK(one(db, "SELECT count(*) FROM t") == 1050);
    integrity(db);
    sqlite3_close(db);
    printf("c_api: %d checks passed\n", checks);
    return 0;
}
