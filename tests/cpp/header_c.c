/* The C header alone, as C99 with -Wall -Wextra -Werror -pedantic. */
#include "txvfs.h"

int header_c_uses(void);
int header_c_uses(void) {
    txvfs_attr a;
    txvfs_usage u;
    txvfs_dirent d;
    txvfs_lock l;
    txvfs_transact_fn f = 0;
    (void)a; (void)u; (void)d; (void)l; (void)f;
    return TXVFS_NAME_MAX + TXVFS_ECONFLICT + (int)sizeof(TXVFS_VERSION);
}
