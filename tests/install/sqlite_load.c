/* A C program that loads the installed SQLite VFS at run time with sqlite3_load_extension
 * (the README's C example for the SQLite VFS), then writes and reads a database in a store.
 *
 *     sqlite_load LIBPATH STORE_DIR      (LIBPATH without ".so" works too) */
#include <sqlite3.h>
#include <stdio.h>

static int fail(sqlite3 *db, const char *what) {
    fprintf(stderr, "%s: %s\n", what, db ? sqlite3_errmsg(db) : "out of memory");
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: sqlite_load LIBPATH STORE_DIR\n"); return 2; }
    char uri[4096];
    snprintf(uri, sizeof uri, "file:/app.db?vfs=txvfs&store=%s", argv[2]);

    /* README sqlite3_load_extension: begin */
    sqlite3 *boot;
    char *err = NULL;
    sqlite3_open(":memory:", &boot);
    sqlite3_enable_load_extension(boot, 1);
    if (sqlite3_load_extension(boot, argv[1], NULL, &err) != SQLITE_OK) {  /* registers "txvfs" */
        fprintf(stderr, "load: %s\n", err);
        return 1;
    }
    sqlite3 *db;
    if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, NULL) != SQLITE_OK)
        return fail(db, "open");
    /* README sqlite3_load_extension: end */

    if (sqlite3_exec(db, "CREATE TABLE IF NOT EXISTS t(v); INSERT INTO t VALUES ('loaded')", NULL, NULL, NULL) != SQLITE_OK)
        return fail(db, "write");
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
        return fail(db, "read");
    printf("%d row(s)\n", sqlite3_column_int(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    sqlite3_close(boot);
    return 0;
}
