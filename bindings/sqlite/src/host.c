/* Finds the host program's SQLite for static registration. The references are weak: the
 * loadable extension (.so) must load into hosts that do not export these symbols (Python's
 * _sqlite3 loads libsqlite3 privately), and it never carries a copy of SQLite. When the library
 * is linked into a program together with SQLite, they resolve to that SQLite. */
#include <stddef.h>

typedef struct sqlite3_vfs sqlite3_vfs;

extern int sqlite3_vfs_register(sqlite3_vfs *, int) __attribute__((weak));
extern sqlite3_vfs *sqlite3_vfs_find(const char *) __attribute__((weak));
extern const char *sqlite3_uri_parameter(const char *, const char *) __attribute__((weak));
extern char *sqlite3_mprintf(const char *, ...) __attribute__((weak));
extern int sqlite3_libversion_number(void) __attribute__((weak));
extern int sqlite3_compileoption_used(const char *) __attribute__((weak));

/* Same layout as HostApi in src/ffi.rs. */
struct txvfs_host_api {
    int (*vfs_register)(sqlite3_vfs *, int);
    sqlite3_vfs *(*vfs_find)(const char *);
    const char *(*uri_parameter)(const char *, const char *);
    char *(*mprintf)(const char *, ...);
    int (*libversion_number)(void);
    int (*compileoption_used)(const char *);
};

void txvfs_sqlite_host_api(struct txvfs_host_api *api) {
    api->vfs_register = sqlite3_vfs_register;
    api->vfs_find = sqlite3_vfs_find;
    api->uri_parameter = sqlite3_uri_parameter;
    api->mprintf = sqlite3_mprintf;
    api->libversion_number = sqlite3_libversion_number;
    api->compileoption_used = sqlite3_compileoption_used;
}
