/* Rows and files in one commit, from C: a SQLite table naming photos and the photos' files, in
 * one txvfs store, written together (a crash or a conflict never leaves a row without its file
 * or a file without its row). SQLite's own API for the rows (through the VFS "txvfs" that
 * libtxvfs carries), txvfs's API for the files.
 * Build: cc rows_and_files.c $(pkg-config --cflags --libs txvfs) -lsqlite3   (see Makefile)
 * Run:   ./rows_and_files STORE_DIR */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <txvfs.h>

#define CHECK(call)                                                                    \
    do {                                                                               \
        int rc_ = (call);                                                              \
        if (rc_ < 0) {                                                                 \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, txvfs_last_error(),         \
                    txvfs_strerror(rc_));                                              \
            return 1;                                                                  \
        }                                                                              \
    } while (0)

static int sql(sqlite3 *db, const char *statement) {
    if (sqlite3_exec(db, statement, NULL, NULL, NULL) == SQLITE_OK) return 0;
    fprintf(stderr, "%s: %s\n", statement, sqlite3_errmsg(db));
    return -1;
}

/* The token of the file transaction of db's write transaction (PRAGMA txvfs_files). */
static int files_token(sqlite3 *db, char *token, size_t cap) {
    sqlite3_stmt *st;
    int ok = sqlite3_prepare_v2(db, "PRAGMA txvfs_files", -1, &st, NULL) == SQLITE_OK &&
             sqlite3_step(st) == SQLITE_ROW;
    if (ok) snprintf(token, cap, "%s", (const char *)sqlite3_column_text(st, 0));
    else fprintf(stderr, "PRAGMA txvfs_files: %s\n", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    return ok ? 0 : -1;
}

/* README rows-and-files: begin */
/* Adds a photo: its row and its file, in one commit. Runs again on a conflict. */
static int add_photo(sqlite3 *db, txvfs_store *store, const char *name, const char *jpeg) {
    char path[256], insert[256], token[128];
    snprintf(path, sizeof path, "/photos/%s", name);
    snprintf(insert, sizeof insert, "INSERT INTO photos VALUES ('%s', %zu)", name, strlen(jpeg));
    for (int attempt = 0; attempt < 100; attempt++) {
        if (sql(db, "BEGIN IMMEDIATE") < 0) return -1;          /* a write transaction */
        txvfs_tx *files = NULL;
        token[0] = '\0';
        int rc = files_token(db, token, sizeof token);        /* PRAGMA txvfs_files */
        if (rc == 0) rc = txvfs_tx_join(store, token, &files); /* its file transaction */
        if (rc == 0) rc = txvfs_write_file(store, files, path, jpeg, strlen(jpeg));
        if (rc == 0) rc = sql(db, insert);
        txvfs_tx_free(files);                                 /* ends nothing */
        if (rc == 0 && sql(db, "COMMIT") == 0) return 0;      /* the row and the file */
        if (!sqlite3_get_autocommit(db)) sql(db, "ROLLBACK"); /* neither */
        int why = txvfs_tx_joined_commit_error(token);        /* why COMMIT failed */
        if (rc != 0 || (why != -TXVFS_ECONFLICT && why != -TXVFS_ETOOOLD)) return -1;
    }
    return -1;
}
/* README rows-and-files: end */

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: rows_and_files STORE_DIR\n");
        return 2;
    }
    txvfs_store *store;
    CHECK(txvfs_store_open(argv[1], NULL, &store));
    CHECK(txvfs_mkdir_all(store, NULL, "/photos", 0755));
    CHECK(txvfs_sqlite_vfs_register(false)); /* the VFS "txvfs" of libtxvfs */

    char uri[4200];
    snprintf(uri, sizeof uri, "file:/index.db?vfs=txvfs&store=%s", argv[1]);
    sqlite3 *db;
    if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
                        NULL) != SQLITE_OK ||
        sql(db, "CREATE TABLE IF NOT EXISTS photos(name TEXT PRIMARY KEY, size INTEGER)") < 0)
        return 1;

    if (add_photo(db, store, "a.jpg", "JPEG a") < 0 || add_photo(db, store, "b.jpg", "JPEG b") < 0)
        return 1;
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, "SELECT count(*), sum(size) FROM photos", -1, &st, NULL);
    sqlite3_step(st);
    printf("photos: %d rows, %d bytes\n", sqlite3_column_int(st, 0), sqlite3_column_int(st, 1));
    sqlite3_finalize(st);
    char buf[64];
    size_t n;
    CHECK(txvfs_read_file(store, NULL, "/photos/b.jpg", buf, sizeof buf, &n));
    printf("/photos/b.jpg: %.*s\n", (int)n, buf);

    /* A duplicate row fails the unit: its file is not kept either. */
    if (add_photo(db, store, "a.jpg", "JPEG a, again") == 0) return 1;
    CHECK(txvfs_read_file(store, NULL, "/photos/a.jpg", buf, sizeof buf, &n));
    printf("/photos/a.jpg: %.*s\n", (int)n, buf);

    sqlite3_close(db);
    txvfs_store_free(store);
    printf("done\n");
    return 0;
}
