/* Links the header-check objects (so each was compiled) and checks the header's version
 * against the library's. */
#include <stdio.h>
#include <string.h>
#include "txvfs.h"

int header_c_uses(void);
int header_c_twice(void);

int main(void) {
    (void)header_c_uses();
    (void)header_c_twice();
    if (strcmp(txvfs_version(), TXVFS_VERSION) != 0) {
        fprintf(stderr, "header version %s, library version %s\n", TXVFS_VERSION, txvfs_version());
        return 1;
    }
    printf("headers compile alone and twice; version %s\n", txvfs_version());
    return 0;
}
