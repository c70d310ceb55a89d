/* The VFS at its edges, through SQLite's C API and the VFS methods themselves (txvfs
 * registered statically against the system libsqlite3). Each step runs in its own process,
 * so a later step sees only what reached the store:
 *
 *     vfs_edges STORE_DIR unlocked-write   a handle that never locks writes, syncs, closes;
 *                                          xAccess and xDelete see the store's files
 *     vfs_edges STORE_DIR unlocked-check   (new process) the data is there
 *     vfs_edges STORE_DIR rollback-fault   a ROLLBACK whose journal reads fail (I/O error
 *                                          injected by a shim VFS over txvfs), then close
 *     vfs_edges STORE_DIR rollback-check   (new process) only the committed rows, whole
 *     vfs_edges STORE_DIR rollback-kill [JOURNAL_MODE]
 *                                          the same failed ROLLBACK (journal mode DELETE, or
 *                                          TRUNCATE, PERSIST), then SIGKILL (no close)
 *     vfs_edges STORE_DIR rollback-recover the same failed ROLLBACK, then a new connection in
 *                                          this process rolls the hot journal back
 *     vfs_edges STORE_DIR lockstate        SQLITE_FCNTL_LOCKSTATE answers for a database in the
 *                                          store and for a temporary database (memory file)
 *     vfs_edges STORE_DIR iocap            SQLITE_IOCAP_BATCH_ATOMIC is claimed only when the
 *                                          SQLite in use was built to use it */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int txvfs_sqlite_register(const char *);

static int checks = 0;
#define CHECK(c) do { checks++; if (!(c)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static void exec(sqlite3 *db, const char *sql) {
    char *err = 0;
    if (sqlite3_exec(db, sql, 0, 0, &err) != SQLITE_OK) { fprintf(stderr, "%s: %s\n", sql, err); exit(1); }
}

static long long one(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, sql, -1, &st, 0) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static void integrity(sqlite3 *db) {
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, 0) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    const char *r = (const char *)sqlite3_column_text(st, 0);
    if (strcmp(r, "ok") != 0) fprintf(stderr, "integrity_check: %s\n", r);
    CHECK(strcmp(r, "ok") == 0);
    sqlite3_finalize(st);
}

/* ------------------------------------------------------------------------------------------
 * Handles used without locks, as SQLite's multiplexor uses every chunk after the first. */

#define PAGES 3
#define PAGE 4096

static void fill(unsigned char *b, int page) {
    for (int i = 0; i < PAGE; i++) b[i] = (unsigned char)(page * 31 + i);
}

/* A filename SQLite would pass to xOpen: URI parameter store=STORE_DIR. */
static sqlite3_filename raw_name(const char *path, const char *store) {
    const char *params[] = {"store", store};
    return sqlite3_create_filename(path, "", "", 1, params);
}

static sqlite3_file *raw_open(sqlite3_vfs *vfs, sqlite3_filename name, int flags, int *rc) {
    sqlite3_file *f = calloc(1, vfs->szOsFile);
    int out = 0;
    *rc = vfs->xOpen(vfs, name, f, flags | SQLITE_OPEN_MAIN_DB, &out);
    return f;
}

static void unlocked_write(const char *store) {
    sqlite3_vfs *vfs = sqlite3_vfs_find("txvfs");
    CHECK(vfs != 0);
    sqlite3_filename kept = raw_name("/raw/kept.db", store);
    sqlite3_filename gone = raw_name("/raw/gone.db", store);
    unsigned char page[PAGE], back[PAGE];
    int rc;
    for (int which = 0; which < 2; which++) {
        sqlite3_file *f = raw_open(vfs, which ? gone : kept, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &rc);
        CHECK(rc == SQLITE_OK);
        for (int p = 0; p < PAGES; p++) {                 /* no xLock anywhere */
            fill(page, p);
            CHECK(f->pMethods->xWrite(f, page, PAGE, (sqlite3_int64)p * PAGE) == SQLITE_OK);
        }
        CHECK(f->pMethods->xSync(f, SQLITE_SYNC_FULL) == SQLITE_OK);
        CHECK(f->pMethods->xClose(f) == SQLITE_OK);
        free(f);
    }
    /* Reopened in this process: the data is there. */
    sqlite3_file *f = raw_open(vfs, kept, SQLITE_OPEN_READWRITE, &rc);
    CHECK(rc == SQLITE_OK);
    sqlite3_int64 size = -1;
    CHECK(f->pMethods->xFileSize(f, &size) == SQLITE_OK);
    CHECK(size == PAGES * PAGE);
    fill(page, 2);
    CHECK(f->pMethods->xRead(f, back, PAGE, 2 * PAGE) == SQLITE_OK);
    CHECK(memcmp(page, back, PAGE) == 0);
    CHECK(f->pMethods->xClose(f) == SQLITE_OK);
    free(f);
    /* xAccess and xDelete see the store's files, not only in-memory ones. */
    int exists = -1;
    CHECK(vfs->xAccess(vfs, kept, SQLITE_ACCESS_EXISTS, &exists) == SQLITE_OK);
    CHECK(exists == 1);
    CHECK(vfs->xAccess(vfs, gone, SQLITE_ACCESS_EXISTS, &exists) == SQLITE_OK);
    CHECK(exists == 1);
    CHECK(vfs->xDelete(vfs, gone, 1) == SQLITE_OK);
    CHECK(vfs->xAccess(vfs, gone, SQLITE_ACCESS_EXISTS, &exists) == SQLITE_OK);
    CHECK(exists == 0);
    f = raw_open(vfs, gone, SQLITE_OPEN_READWRITE, &rc);
    CHECK(rc == SQLITE_CANTOPEN);
    free(f);
    CHECK(vfs->xDelete(vfs, gone, 1) == SQLITE_IOERR_DELETE_NOENT);
    sqlite3_free_filename(kept);
    sqlite3_free_filename(gone);
}

static void unlocked_check(const char *store) {
    sqlite3_vfs *vfs = sqlite3_vfs_find("txvfs");
    sqlite3_filename kept = raw_name("/raw/kept.db", store);
    sqlite3_filename gone = raw_name("/raw/gone.db", store);
    int rc;
    sqlite3_file *f = raw_open(vfs, kept, SQLITE_OPEN_READONLY, &rc);
    CHECK(rc == SQLITE_OK);
    sqlite3_int64 size = -1;
    CHECK(f->pMethods->xFileSize(f, &size) == SQLITE_OK);
    CHECK(size == PAGES * PAGE);
    unsigned char page[PAGE], back[PAGE];
    for (int p = 0; p < PAGES; p++) {
        fill(page, p);
        CHECK(f->pMethods->xRead(f, back, PAGE, (sqlite3_int64)p * PAGE) == SQLITE_OK);
        CHECK(memcmp(page, back, PAGE) == 0);
    }
    CHECK(f->pMethods->xClose(f) == SQLITE_OK);
    free(f);
    f = raw_open(vfs, gone, SQLITE_OPEN_READONLY, &rc);
    CHECK(rc == SQLITE_CANTOPEN);                         /* deleted for good */
    free(f);
    sqlite3_free_filename(kept);
    sqlite3_free_filename(gone);
}

/* ------------------------------------------------------------------------------------------
 * A shim VFS over txvfs that can fail every read of a rollback journal. */

typedef struct FaultFile {
    sqlite3_file base;
    sqlite3_file *real;   /* follows this struct */
    int journal;
} FaultFile;

static sqlite3_vfs *below;
static int fail_journal_reads = 0;    /* reads still allowed before failing; -1: never fail */
static int journal_reads_failed = 0;

#define REAL(f) (((FaultFile *)(f))->real)
static int ff_close(sqlite3_file *f) { return REAL(f)->pMethods->xClose(REAL(f)); }
static int ff_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) {
    if (((FaultFile *)f)->journal && fail_journal_reads >= 0) {
        if (fail_journal_reads == 0) { journal_reads_failed++; return SQLITE_IOERR_READ; }
        fail_journal_reads--;
    }
    return REAL(f)->pMethods->xRead(REAL(f), b, n, o);
}
static int ff_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o) { return REAL(f)->pMethods->xWrite(REAL(f), b, n, o); }
static int ff_truncate(sqlite3_file *f, sqlite3_int64 s) { return REAL(f)->pMethods->xTruncate(REAL(f), s); }
static int ff_sync(sqlite3_file *f, int fl) { return REAL(f)->pMethods->xSync(REAL(f), fl); }
static int ff_size(sqlite3_file *f, sqlite3_int64 *s) { return REAL(f)->pMethods->xFileSize(REAL(f), s); }
static int ff_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int ff_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int ff_reserved(sqlite3_file *f, int *r) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), r); }
static int ff_fcntl(sqlite3_file *f, int op, void *a) { return REAL(f)->pMethods->xFileControl(REAL(f), op, a); }
static int ff_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int ff_dev(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }

static const sqlite3_io_methods fault_io = {
    1, ff_close, ff_read, ff_write, ff_truncate, ff_sync, ff_size, ff_lock, ff_unlock, ff_reserved,
    ff_fcntl, ff_sector, ff_dev, 0, 0, 0, 0, 0, 0};

static int fv_open(sqlite3_vfs *v, sqlite3_filename name, sqlite3_file *f, int flags, int *out) {
    (void)v;
    FaultFile *p = (FaultFile *)f;
    p->real = (sqlite3_file *)&p[1];
    p->journal = (flags & SQLITE_OPEN_MAIN_JOURNAL) != 0;
    int rc = below->xOpen(below, name, p->real, flags, out);
    f->pMethods = p->real->pMethods ? &fault_io : 0;
    return rc;
}

static sqlite3_vfs fault_vfs;

static void register_fault_vfs(void) {
    below = sqlite3_vfs_find("txvfs");
    CHECK(below != 0);
    fault_vfs = *below;
    fault_vfs.pNext = 0;
    fault_vfs.zName = "faulty";
    fault_vfs.szOsFile = (int)sizeof(FaultFile) + below->szOsFile;
    fault_vfs.xOpen = fv_open;
    CHECK(sqlite3_vfs_register(&fault_vfs, 0) == SQLITE_OK);
}

#define COMMITTED 100

static void rollback_fault(const char *store, int then_kill, const char *journal_mode) {
    register_fault_vfs();
    char uri[4096];
    snprintf(uri, sizeof uri, "file:/rb/r.db?store=%s", store);
    sqlite3 *db;
    fail_journal_reads = -1;
    CHECK(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, "faulty") == SQLITE_OK);
    exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);"
             "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<100) "
             "INSERT INTO t(v) SELECT randomblob(300) FROM c;");
    CHECK(one(db, "SELECT count(*) FROM t") == COMMITTED);
    char jm[64];
    snprintf(jm, sizeof jm, "PRAGMA journal_mode=%s", journal_mode);
    exec(db, jm);
    /* A tiny cache: SQLite writes changed pages into the database file before COMMIT, so the
     * ROLLBACK has to read the journal back. */
    exec(db, "PRAGMA cache_size=5; BEGIN; UPDATE t SET v = zeroblob(300);"
             "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<400) "
             "INSERT INTO t(v) SELECT randomblob(1000) FROM c;");
    fail_journal_reads = 20;          /* part of the journal is played back, then reads fail */
    /* SQLite ignores errors of a rollback (ROLLBACK returns SQLITE_OK); its pager is left in
     * the error state with a hot journal, for the next opener to roll back. */
    int rc = sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
    CHECK(journal_reads_failed > 0);
    printf("rollback-fault: ROLLBACK returned %s, %d journal reads failed as injected\n", sqlite3_errstr(rc), journal_reads_failed);
    if (then_kill) {
        fflush(stdout);
        raise(SIGKILL);
    }
    CHECK(sqlite3_close_v2(db) == SQLITE_OK);
    /* The process ends here, before anyone in it rolls the hot journal back: the next process
     * sees only what reached the store. */
}

static void rollback_check(const char *store) {
    char uri[4096];
    snprintf(uri, sizeof uri, "file:/rb/r.db?store=%s", store);
    sqlite3 *db;
    CHECK(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_URI, "txvfs") == SQLITE_OK);
    integrity(db);
    CHECK(one(db, "SELECT count(*) FROM t") == COMMITTED);
    CHECK(one(db, "SELECT max(length(v)) FROM t") == 300);
    CHECK(one(db, "SELECT count(*) FROM t WHERE v = zeroblob(300)") == 0);   /* no rolled-back row */
    sqlite3_close(db);
}

/* ------------------------------------------------------------------------------------------
 * SQLITE_FCNTL_LOCKSTATE (PRAGMA lock_status in SQLite's test builds), for every kind of file. */

static int lockstate(sqlite3 *db) {
    int level = -1;
    CHECK(sqlite3_file_control(db, "main", SQLITE_FCNTL_LOCKSTATE, &level) == SQLITE_OK);
    return level;
}

static void lock_state(const char *store) {
    char uri[4096];
    snprintf(uri, sizeof uri, "file:/ls/l.db?store=%s", store);
    sqlite3 *db;
    CHECK(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, "txvfs") == SQLITE_OK);
    exec(db, "CREATE TABLE t(x); BEGIN; INSERT INTO t VALUES (1);");
    CHECK(lockstate(db) >= SQLITE_LOCK_RESERVED);
    exec(db, "COMMIT;");
    CHECK(lockstate(db) == SQLITE_LOCK_NONE);
    sqlite3_close(db);
    /* A temporary database (no name): a memory file, which SQLite never locks. A tiny cache
     * makes SQLite spill pages into the file, so the file is open. */
    CHECK(sqlite3_open_v2("", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, "txvfs") == SQLITE_OK);
    exec(db, "PRAGMA cache_size=2; CREATE TABLE t(x); BEGIN;"
             "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<200) "
             "INSERT INTO t SELECT randomblob(1000) FROM c;");
    CHECK(lockstate(db) == SQLITE_LOCK_NONE);
    exec(db, "COMMIT;");
    CHECK(lockstate(db) == SQLITE_LOCK_NONE);
    sqlite3_close(db);
}

/* ------------------------------------------------------------------------------------------
 * SQLITE_IOCAP_BATCH_ATOMIC: true only if SQLite brackets its writes with
 * SQLITE_FCNTL_BEGIN/COMMIT_ATOMIC_WRITE, that is, if it was built with
 * SQLITE_ENABLE_BATCH_ATOMIC_WRITE (tests/sqlite/batch.c checks a build that is). */

static void iocap(const char *store) {
    char uri[4096];
    snprintf(uri, sizeof uri, "file:/cap/c.db?store=%s", store);
    sqlite3 *db;
    CHECK(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, "txvfs") == SQLITE_OK);
    exec(db, "CREATE TABLE t(x)");
    sqlite3_file *f = 0;
    CHECK(sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &f) == SQLITE_OK && f);
    int claims = (f->pMethods->xDeviceCharacteristics(f) & SQLITE_IOCAP_BATCH_ATOMIC) != 0;
    int built = sqlite3_compileoption_used("ENABLE_BATCH_ATOMIC_WRITE");
    printf("iocap: SQLite built with batch atomic writes: %d, txvfs claims SQLITE_IOCAP_BATCH_ATOMIC: %d\n", built, claims);
    CHECK(claims == built);
    sqlite3_close(db);
}

int main(int argc, char **argv) {
    if (argc != 3 && argc != 4) { fprintf(stderr, "usage: vfs_edges STORE_DIR STEP [JOURNAL_MODE]\n"); return 2; }
    const char *journal_mode = argc == 4 ? argv[3] : "delete";
    CHECK(txvfs_sqlite_register(0) == SQLITE_OK);
    const char *store = argv[1], *step = argv[2];
    if (!strcmp(step, "unlocked-write")) unlocked_write(store);
    else if (!strcmp(step, "unlocked-check")) unlocked_check(store);
    else if (!strcmp(step, "rollback-fault")) rollback_fault(store, 0, journal_mode);
    else if (!strcmp(step, "rollback-kill")) rollback_fault(store, 1, journal_mode);
    else if (!strcmp(step, "rollback-check")) rollback_check(store);
    else if (!strcmp(step, "lockstate")) lock_state(store);
    else if (!strcmp(step, "iocap")) iocap(store);
    else if (!strcmp(step, "rollback-recover")) {
        rollback_fault(store, 0, journal_mode);
        fail_journal_reads = -1;
        rollback_check(store);
    }
    else { fprintf(stderr, "unknown step %s\n", step); return 2; }
    printf("vfs_edges %s: %d checks passed\n", step, checks);
    return 0;
}
