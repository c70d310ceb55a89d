/* Wrapper for SQLite's speedtest1 (3.40 has no --vfs flag): with SPEEDTEST_TXVFS=1 it makes
 * txvfs the default VFS through the static registration function, then runs speedtest1's
 * main (compiled with -Dmain=speedtest1_main). The store comes from TXVFS_SQLITE_STORE. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int speedtest1_main(int, char **);
int txvfs_sqlite_register_default(const char *);

int main(int argc, char **argv) {
    const char *t = getenv("SPEEDTEST_TXVFS");
    if (t && strcmp(t, "1") == 0 && txvfs_sqlite_register_default(0) != 0) {
        fprintf(stderr, "txvfs registration failed\n");
        return 1;
    }
    return speedtest1_main(argc, argv);
}
