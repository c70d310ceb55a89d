/* Driver for a SQLite built with SQLITE_ENABLE_BATCH_ATOMIC_WRITE and
 * SQLITE_EXTRA_INIT=txvfs_sqlite_register_default: txvfs is registered (as the default VFS)
 * by every sqlite3_initialize, and commits use BEGIN/COMMIT_ATOMIC_WRITE with no journal.
 *
 *     batch STORE_DIR */
#include "sqlite3.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks = 0;
#define CHECK(c) do { checks++; if (!(c)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static void exec(sqlite3 *db, const char *sql) {
    char *err = 0;
    if (sqlite3_exec(db, sql, 0, 0, &err) != SQLITE_OK) { fprintf(stderr, "%s: %s\n", sql, err); exit(1); }
}

static long long one(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, sql, -1, &st, 0) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* One counter from PRAGMA txvfs_stats ("commits=N durable=N batch=N grouped=N journals=N"). */
static long long stat(sqlite3 *db, const char *key) {
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, "PRAGMA txvfs_stats", -1, &st, 0) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    const char *s = strstr((const char *)sqlite3_column_text(st, 0), key);
    CHECK(s != 0);
    long long v = atoll(s + strlen(key) + 1);
    sqlite3_finalize(st);
    return v;
}

/* The VFS's device characteristics for one schema's database file. */
static int device_flags(sqlite3 *db, const char *schema) {
    sqlite3_file *f = 0;
    CHECK(sqlite3_file_control(db, schema, SQLITE_FCNTL_FILE_POINTER, &f) == SQLITE_OK && f);
    return f->pMethods->xDeviceCharacteristics(f);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: batch STORE_DIR\n"); return 2; }
    CHECK(sqlite3_compileoption_used("ENABLE_BATCH_ATOMIC_WRITE"));
    CHECK(sqlite3_initialize() == SQLITE_OK);
    CHECK(sqlite3_vfs_find(0) == sqlite3_vfs_find("txvfs"));   /* SQLITE_EXTRA_INIT ran */
    CHECK(sqlite3_shutdown() == SQLITE_OK);                     /* ... and runs again */
    CHECK(sqlite3_initialize() == SQLITE_OK);
    CHECK(sqlite3_vfs_find(0) == sqlite3_vfs_find("txvfs"));

    char uri[4096];
    snprintf(uri, sizeof uri, "file:/batch/b.db?store=%s", argv[1]);
    sqlite3 *db;
    CHECK(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, 0) == SQLITE_OK);
    exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)");
    long long b0 = stat(db, "batch"), j0 = stat(db, "journals");
    for (int i = 0; i < 100; i++)
        exec(db, "INSERT INTO t(v) VALUES (randomblob(200))");
    CHECK(stat(db, "batch") - b0 == 100);      /* each commit was one batch atomic write */
    CHECK(stat(db, "journals") == j0);         /* and no rollback journal was opened */

    /* A transaction larger than the cache spills: SQLite falls back to a journal (in memory)
     * and still commits as one txvfs transaction. */
    exec(db, "PRAGMA cache_size=5; BEGIN; WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<500) "
             "INSERT INTO t(v) SELECT randomblob(1000) FROM c; COMMIT;");
    CHECK(one(db, "SELECT count(*) FROM t") == 600);
    /* ROLLBACK of a batch-sized transaction. */
    exec(db, "PRAGMA cache_size=2000; BEGIN; INSERT INTO t(v) VALUES (1); ROLLBACK;");
    CHECK(one(db, "SELECT count(*) FROM t") == 600);
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, 0) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0);
    sqlite3_finalize(st);
    sqlite3_close(db);

    CHECK(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, 0) == SQLITE_OK);
    CHECK(one(db, "SELECT count(*) FROM t") == 600);
    CHECK(device_flags(db, "main") & SQLITE_IOCAP_BATCH_ATOMIC);
    /* A database in a commit group commits with the others at phase two, not on its own: it
     * must not claim batch atomic writes, and its commits use the (in-memory) journal. */
    exec(db, "PRAGMA main.txvfs_group='g'");
    CHECK(!(device_flags(db, "main") & SQLITE_IOCAP_BATCH_ATOMIC));
    b0 = stat(db, "batch");
    exec(db, "INSERT INTO t(v) VALUES (1)");
    CHECK(stat(db, "batch") == b0);
    CHECK(one(db, "SELECT count(*) FROM t") == 601);
    sqlite3_close(db);
    printf("batch atomic (SQLite %s): %d checks passed\n", sqlite3_libversion(), checks);
    return 0;
}
