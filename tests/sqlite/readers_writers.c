/* Readers never block writers, from C (static registration, the system libsqlite3): this
 * process holds a read transaction open while a second process (this program again, "write")
 * commits an INSERT with a busy timeout; the reader still sees its snapshot, and its write then
 * fails at once with SQLITE_BUSY_SNAPSHOT; after ROLLBACK it sees the row and may write.
 *
 *     readers_writers STORE_DIR          (the reader; runs the writer itself)
 *     readers_writers STORE_DIR write    (the writer) */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int txvfs_sqlite_register(const char *);

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static sqlite3 *open_db(const char *store) {
    char uri[4096];
    snprintf(uri, sizeof uri, "file:/rwc/shared.db?vfs=txvfs&store=%s", store);
    sqlite3 *db;
    CHECK(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, 0) == SQLITE_OK);
    sqlite3_extended_result_codes(db, 1);
    return db;
}

static int exec(sqlite3 *db, const char *sql) {
    return sqlite3_exec(db, sql, 0, 0, 0);
}

static long long count(sqlite3 *db) {
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &st, 0) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

int main(int argc, char **argv) {
    CHECK(argc >= 2);
    CHECK(txvfs_sqlite_register(0) == SQLITE_OK);
    const char *store = argv[1];
    if (argc > 2 && strcmp(argv[2], "write") == 0) {
        sqlite3 *w = open_db(store);
        sqlite3_busy_timeout(w, 30000);
        CHECK(exec(w, "INSERT INTO t VALUES ('from the writer')") == SQLITE_OK);
        CHECK(sqlite3_close(w) == SQLITE_OK);
        return 0;
    }
    sqlite3 *r = open_db(store);
    CHECK(exec(r, "CREATE TABLE t(v); INSERT INTO t VALUES ('one')") == SQLITE_OK);
    CHECK(exec(r, "BEGIN") == SQLITE_OK);
    CHECK(count(r) == 1);
    /* The writer runs to its end while this read transaction is open. */
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' '%s' write", argv[0], store);
    CHECK(system(cmd) == 0);
    CHECK(count(r) == 1);
    CHECK(exec(r, "INSERT INTO t VALUES ('from the stale reader')") == SQLITE_BUSY_SNAPSHOT);
    CHECK(exec(r, "ROLLBACK") == SQLITE_OK);
    CHECK(count(r) == 2);
    CHECK(exec(r, "INSERT INTO t VALUES ('from the reader')") == SQLITE_OK);
    CHECK(count(r) == 3);
    CHECK(sqlite3_close(r) == SQLITE_OK);
    printf("readers_writers.c: the writer committed during the read; BUSY_SNAPSHOT after\n");
    return 0;
}
