/* Glue that makes SQLite's own testfixture run its TCL suite on txvfs.
 *
 * - txvfs_tcl_extra_init (SQLITE_EXTRA_INIT): when TXVFS_TCL_VFS=txvfs, registers the txvfs VFS
 *   (libtxvfs_sqlite.so, which calls back into the SQLite compiled into this testfixture: the
 *   library finds it through weak symbols, so the VFS and the tests share one SQLite) as the
 *   default VFS. Without the variable the testfixture is stock (the unix VFS baseline).
 * - txvfsTestInit (TCLSH_INIT_PROC): SQLite's own sqlite3TestInit, then, on txvfs, commands
 *   that reach the store through the VFS (txvfs_delete, txvfs_exists, txvfs_size, txvfs_copy)
 *   and a wrapper around Tcl's `file` so that tester.tcl's forcedelete, `file exists`,
 *   `file size` and `file copy` see the databases in the store as well as host files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcl.h>
#include "sqlite3.h"

extern const char *sqlite3TestInit(Tcl_Interp *);
extern int txvfs_sqlite_register_default(const char *);

static int on_txvfs(void) {
  const char *v = getenv("TXVFS_TCL_VFS");
  return v && strcmp(v, "txvfs") == 0;
}

int txvfs_tcl_extra_init(const char *unused) {
  return on_txvfs() ? txvfs_sqlite_register_default(unused) : SQLITE_OK;
}

/* A file name as SQLite hands it to a VFS: four NULs before (sqlite3_uri_parameter walks back
 * to them) and after (no URI parameters). Free with free(p - 4). */
static char *vfs_name(sqlite3_vfs *vfs, const char *name) {
  char *buf = calloc(1, 8 + (size_t)vfs->mxPathname + 1);
  if (!buf) return 0;
  if (vfs->xFullPathname(vfs, name, vfs->mxPathname, buf + 4) != SQLITE_OK) {
    free(buf);
    return 0;
  }
  return buf + 4;
}

static sqlite3_vfs *txvfs(Tcl_Interp *interp) {
  sqlite3_vfs *vfs = sqlite3_vfs_find("txvfs");
  if (!vfs) Tcl_SetResult(interp, "txvfs VFS not registered", TCL_STATIC);
  return vfs;
}

/* txvfs_exists NAME: 1 when NAME exists in the store (or as an in-memory journal). */
static int cmd_exists(ClientData cd, Tcl_Interp *interp, int objc, Tcl_Obj *const objv[]) {
  (void)cd;
  if (objc != 2) { Tcl_WrongNumArgs(interp, 1, objv, "NAME"); return TCL_ERROR; }
  sqlite3_vfs *vfs = txvfs(interp);
  if (!vfs) return TCL_ERROR;
  char *n = vfs_name(vfs, Tcl_GetString(objv[1]));
  int out = 0;
  if (n) {
    if (vfs->xAccess(vfs, n, SQLITE_ACCESS_EXISTS, &out) != SQLITE_OK) out = 0;
    free(n - 4);
  }
  Tcl_SetObjResult(interp, Tcl_NewIntObj(out));
  return TCL_OK;
}

/* txvfs_delete NAME: deletes NAME from the store; absent is not an error. */
static int cmd_delete(ClientData cd, Tcl_Interp *interp, int objc, Tcl_Obj *const objv[]) {
  (void)cd;
  if (objc != 2) { Tcl_WrongNumArgs(interp, 1, objv, "NAME"); return TCL_ERROR; }
  sqlite3_vfs *vfs = txvfs(interp);
  if (!vfs) return TCL_ERROR;
  char *n = vfs_name(vfs, Tcl_GetString(objv[1]));
  if (!n) return TCL_OK;
  int exists = 0;
  int rc = vfs->xAccess(vfs, n, SQLITE_ACCESS_EXISTS, &exists);
  if (rc == SQLITE_OK && exists) rc = vfs->xDelete(vfs, n, 0);
  free(n - 4);
  if (rc != SQLITE_OK && rc != SQLITE_IOERR_DELETE_NOENT) {
    Tcl_SetObjResult(interp, Tcl_ObjPrintf("txvfs_delete: error %d", rc));
    return TCL_ERROR;
  }
  return TCL_OK;
}

/* Opens NAME through txvfs (a main database: the only kind kept in the store). */
static sqlite3_file *open_file(sqlite3_vfs *vfs, const char *name, int flags) {
  char *n = vfs_name(vfs, name);
  if (!n) return 0;
  sqlite3_file *f = calloc(1, (size_t)vfs->szOsFile);
  int rc = f ? vfs->xOpen(vfs, n, f, flags | SQLITE_OPEN_MAIN_DB, &flags) : SQLITE_NOMEM;
  free(n - 4);
  if (rc != SQLITE_OK) {
    if (f && f->pMethods) f->pMethods->xClose(f);
    free(f);
    return 0;
  }
  return f;
}

static void close_file(sqlite3_file *f) {
  f->pMethods->xClose(f);
  free(f);
}

/* txvfs_size NAME: the size of NAME in the store. */
static int cmd_size(ClientData cd, Tcl_Interp *interp, int objc, Tcl_Obj *const objv[]) {
  (void)cd;
  if (objc != 2) { Tcl_WrongNumArgs(interp, 1, objv, "NAME"); return TCL_ERROR; }
  sqlite3_vfs *vfs = txvfs(interp);
  if (!vfs) return TCL_ERROR;
  sqlite3_file *f = open_file(vfs, Tcl_GetString(objv[1]), SQLITE_OPEN_READONLY);
  if (!f) {
    Tcl_SetObjResult(interp, Tcl_ObjPrintf("txvfs_size: cannot open %s", Tcl_GetString(objv[1])));
    return TCL_ERROR;
  }
  sqlite3_int64 size = 0;
  int rc = f->pMethods->xFileSize(f, &size);
  close_file(f);
  if (rc != SQLITE_OK) { Tcl_SetResult(interp, "txvfs_size: xFileSize failed", TCL_STATIC); return TCL_ERROR; }
  Tcl_SetObjResult(interp, Tcl_NewWideIntObj(size));
  return TCL_OK;
}

/* txvfs_copy FROM TO: copies store file FROM over store file TO. */
static int cmd_copy(ClientData cd, Tcl_Interp *interp, int objc, Tcl_Obj *const objv[]) {
  (void)cd;
  if (objc != 3) { Tcl_WrongNumArgs(interp, 1, objv, "FROM TO"); return TCL_ERROR; }
  sqlite3_vfs *vfs = txvfs(interp);
  if (!vfs) return TCL_ERROR;
  sqlite3_file *from = open_file(vfs, Tcl_GetString(objv[1]), SQLITE_OPEN_READONLY);
  sqlite3_file *to = open_file(vfs, Tcl_GetString(objv[2]), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  int rc = (from && to) ? SQLITE_OK : SQLITE_CANTOPEN;
  sqlite3_int64 size = 0, off;
  char buf[65536];
  if (rc == SQLITE_OK) rc = from->pMethods->xFileSize(from, &size);
  if (rc == SQLITE_OK) rc = to->pMethods->xTruncate(to, 0);
  for (off = 0; rc == SQLITE_OK && off < size; off += sizeof buf) {
    int n = size - off < (sqlite3_int64)sizeof buf ? (int)(size - off) : (int)sizeof buf;
    rc = from->pMethods->xRead(from, buf, n, off);
    if (rc == SQLITE_OK) rc = to->pMethods->xWrite(to, buf, n, off);
  }
  if (rc == SQLITE_OK) rc = to->pMethods->xSync(to, SQLITE_SYNC_NORMAL);
  if (from) close_file(from);
  if (to) close_file(to);
  if (rc != SQLITE_OK) {
    Tcl_SetObjResult(interp, Tcl_ObjPrintf("txvfs_copy: error %d", rc));
    return TCL_ERROR;
  }
  return TCL_OK;
}

/* Tcl's `file`, seeing the store: delete removes from both, exists/size/copy prefer the store. */
static const char *file_wrapper =
  "rename ::file ::txvfs_host_file\n"
  "proc ::file {cmd args} {\n"
  "  set names {}\n"
  "  foreach a $args { if {$a ni {-force --}} { lappend names $a } }\n"
  "  switch -exact -- $cmd {\n"
  "    delete { foreach n $names { catch { txvfs_delete $n } } }\n"
  "    exists { if {[llength $names] == 1 && [txvfs_exists [lindex $names 0]]} { return 1 } }\n"
  "    size { if {[llength $names] == 1 && [txvfs_exists [lindex $names 0]]} {\n"
  "      return [txvfs_size [lindex $names 0]] } }\n"
  "    copy { if {[llength $names] == 2 && [txvfs_exists [lindex $names 0]]} {\n"
  "      txvfs_copy {*}$names; return } }\n"
  "  }\n"
  "  uplevel 1 [list ::txvfs_host_file $cmd {*}$args]\n"
  "}\n"
  /* glob cannot list the store (a VFS has no directory listing): `glob [-nocomplain] NAME*`,
   * tester.tcl's way to find a database and its companions, also returns the companions
   * SQLite's tests create (journals, test.db2, ...) that exist in the store. */
  "rename ::glob ::txvfs_host_glob\n"
  "proc ::glob {args} {\n"
  "  set pats [lsearch -all -inline -not -exact $args -nocomplain]\n"
  "  if {[llength $pats] != 1 || ![regexp {^([^*?\\[\\]{}]+)\\*$} [lindex $pats 0] -> p]} {\n"
  "    return [uplevel 1 [list ::txvfs_host_glob {*}$args]]\n"
  "  }\n"
  "  set r [::txvfs_host_glob -nocomplain [lindex $pats 0]]\n"
  "  foreach s {{} -journal -wal -shm 0 1 2 3 4 5 6 7 8 9 2-journal 3-journal} {\n"
  "    if {[lsearch -exact $r $p$s] < 0 && [txvfs_exists $p$s]} { lappend r $p$s }\n"
  "  }\n"
  "  if {$r eq {} && [lsearch -exact $args -nocomplain] < 0} {\n"
  "    error \"no files matched glob pattern \\\"[lindex $pats 0]\\\"\"\n"
  "  }\n"
  "  return $r\n"
  "}\n";

const char *txvfsTestInit(Tcl_Interp *interp) {
  const char *script = sqlite3TestInit(interp);
  if (on_txvfs()) {
    Tcl_CreateObjCommand(interp, "txvfs_exists", cmd_exists, 0, 0);
    Tcl_CreateObjCommand(interp, "txvfs_delete", cmd_delete, 0, 0);
    Tcl_CreateObjCommand(interp, "txvfs_size", cmd_size, 0, 0);
    Tcl_CreateObjCommand(interp, "txvfs_copy", cmd_copy, 0, 0);
    /* The VFS closes a store with its last open database file; tests open and close databases
     * thousands of times, and reopening RocksDB each time costs more than the tests. One file
     * held open for the life of the process keeps the store open. */
    sqlite3_vfs *vfs = sqlite3_vfs_find("txvfs");
    if (!vfs || !open_file(vfs, "/.txvfs-tcl-keep-store-open", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) {
      fprintf(stderr, "txvfs: cannot open the store (TXVFS_SQLITE_STORE)\n");
      exit(1);
    }
    if (Tcl_Eval(interp, file_wrapper) != TCL_OK) {
      fprintf(stderr, "txvfs: %s\n", Tcl_GetStringResult(interp));
      exit(1);
    }
  }
  return script;
}
