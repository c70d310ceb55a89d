/* libtxvfs dlopen()ed after SQLite loaded libtxvfs_sqlite.so as an extension (SQLite's loader
 * uses RTLD_GLOBAL, so that copy's exported txvfs_sqlite_register comes first in the global
 * scope): txvfs_sqlite_vfs_register must still register libtxvfs's own VFS, whose
 * PRAGMA txvfs_files token txvfs_tx_join (of libtxvfs) knows. Linked with -lsqlite3 -ldl only.
 *
 *     vfs_after_extension LIBTXVFS_SQLITE_SO LIBTXVFS_SO STORE_DIR */
#include <dlfcn.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct txvfs_store txvfs_store;
typedef struct txvfs_tx txvfs_tx;

static void *sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    if (!p) {
        fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: vfs_after_extension LIBTXVFS_SQLITE_SO LIBTXVFS_SO STORE_DIR\n");
        return 2;
    }
    sqlite3 *boot;
    char *err = NULL;
    sqlite3_open(":memory:", &boot);
    sqlite3_enable_load_extension(boot, 1);
    if (sqlite3_load_extension(boot, argv[1], NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "load %s: %s\n", argv[1], err);
        return 1;
    }
    void *h = dlopen(argv[2], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    int (*vfs_register)(bool) = (int (*)(bool))sym(h, "txvfs_sqlite_vfs_register");
    int (*store_open)(const char *, const void *, txvfs_store **) =
        (int (*)(const char *, const void *, txvfs_store **))sym(h, "txvfs_store_open");
    int (*join)(txvfs_store *, const char *, txvfs_tx **) =
        (int (*)(txvfs_store *, const char *, txvfs_tx **))sym(h, "txvfs_tx_join");
    void (*tx_free)(txvfs_tx *) = (void (*)(txvfs_tx *))sym(h, "txvfs_tx_free");
    void (*store_free)(txvfs_store *) = (void (*)(txvfs_store *))sym(h, "txvfs_store_free");
    const char *(*last_error)(void) = (const char *(*)(void))sym(h, "txvfs_last_error");

    txvfs_store *store;
    if (vfs_register(false) != 0 || store_open(argv[3], NULL, &store) != 0) {
        fprintf(stderr, "libtxvfs: %s\n", last_error());
        return 1;
    }
    char uri[4200];
    snprintf(uri, sizeof uri, "file:/t.db?vfs=txvfs&store=%s", argv[3]);
    sqlite3 *db;
    sqlite3_stmt *st;
    if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, NULL) ||
        sqlite3_exec(db, "CREATE TABLE t(v); BEGIN IMMEDIATE", NULL, NULL, NULL) ||
        sqlite3_prepare_v2(db, "PRAGMA txvfs_files", -1, &st, NULL) || sqlite3_step(st) != SQLITE_ROW) {
        fprintf(stderr, "sqlite: %s\n", sqlite3_errmsg(db));
        return 1;
    }
    txvfs_tx *tx = NULL;
    int rc = join(store, (const char *)sqlite3_column_text(st, 0), &tx);
    if (rc != 0) {
        fprintf(stderr, "txvfs_tx_join: %d: %s\n", rc, last_error());
        return 1;
    }
    sqlite3_finalize(st);
    tx_free(tx);
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(db);
    sqlite3_close(boot);
    store_free(store);
    printf("libtxvfs's VFS after the extension: joined\n");
    return 0;
}
