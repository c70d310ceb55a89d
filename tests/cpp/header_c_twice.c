/* The C header included twice. */
#include "txvfs.h"
#include "txvfs.h"

int header_c_twice(void);
int header_c_twice(void) { return TXVFS_VERSION_MAJOR; }
