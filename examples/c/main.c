/* txvfs from C: a multi-file transaction, reading back, and error handling.
 * Build: cc main.c $(pkg-config --cflags --libs txvfs) -o example   (see Makefile)
 * Run:   ./example [store-uri]    (default "memory:") */
#include <errno.h>
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

int main(int argc, char **argv) {
    txvfs_store *store;
    CHECK(txvfs_store_open(argc > 1 ? argv[1] : "memory:", NULL, &store));

    txvfs_tx *tx;
    CHECK(txvfs_tx_begin(store, &tx));
    CHECK(txvfs_mkdir_all(store, tx, "/docs", 0755));
    CHECK(txvfs_write_file(store, tx, "/docs/a.txt", "part one", 8));  /* nobody sees a.txt */
    CHECK(txvfs_write_file(store, tx, "/docs/b.txt", "part two", 8));  /* until both commit */
    CHECK(txvfs_tx_commit(tx));
    txvfs_tx_free(tx);

    char buf[64];
    size_t n;
    CHECK(txvfs_read_file(store, NULL, "/docs/b.txt", buf, sizeof buf, &n)); /* NULL: no tx */
    printf("b.txt: %.*s\n", (int)n, buf);

    txvfs_attr st;
    int rc = txvfs_stat(store, NULL, "/docs/missing.txt", &st);   /* 0 or -errno */
    if (rc == -ENOENT)
        printf("missing.txt: %s\n", txvfs_last_error());

    txvfs_dirent entries[16];
    CHECK(txvfs_readdir(store, NULL, "/docs", NULL, entries, 16, &n));
    for (size_t i = 0; i < n; i++)
        printf("entry: %s\n", entries[i].name);

    txvfs_store_free(store);
    printf("done\n");
    return rc == -ENOENT ? 0 : 1;
}
