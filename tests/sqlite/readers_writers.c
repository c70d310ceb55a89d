/* Readers never block writers, writers never block readers, from C (static registration, the
 * system libsqlite3), in one journal mode per run, each connection of the scenario in its own
 * process (this program again, with a role), ordered by pipes (nothing is timed):
 *  1. this process holds a read transaction open while a second process commits an INSERT with
 *     a busy timeout; the reader still sees its snapshot, and its write then fails at once with
 *     SQLITE_BUSY_SNAPSHOT; after ROLLBACK it sees the row and may write;
 *  2. a second process holds BEGIN EXCLUSIVE with an uncommitted row: this process, with no busy
 *     handler, reads the committed state, and its BEGIN IMMEDIATE gets SQLITE_BUSY (writers
 *     exclude each other); the holder commits; this process then writes;
 *  3. (txvfs) PRAGMA journal_mode=WAL answers "wal", a new connection reads "wal",
 *     PRAGMA wal_checkpoint answers 0|-1|-1, and journal_mode=DELETE switches back with the data.
 *
 *     readers_writers STORE_DIR [JOURNAL_MODE [stock]]
 * "stock" runs the same scenario on stock SQLite (the unix VFS, a host file STORE_DIR/host.db),
 * the reference: it passes in WAL mode and fails in rollback modes (step 1: the reader blocks
 * the writer). Roles (internal): ... write | hold. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int txvfs_sqlite_register(const char *);

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static const char *store, *jm = "delete";
static int stock;

static sqlite3 *open_db(int busy_ms) {
    char uri[4096];
    if (stock)
        snprintf(uri, sizeof uri, "file:%s/host.db", store);
    else
        snprintf(uri, sizeof uri, "file:/rwc/shared.db?vfs=txvfs&store=%s", store);
    sqlite3 *db;
    CHECK(sqlite3_open_v2(uri, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, 0) == SQLITE_OK);
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, busy_ms);
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA journal_mode=%s", jm);
    if (jm) CHECK(sqlite3_exec(db, sql, 0, 0, 0) == SQLITE_OK);
    return db;
}

static int exec(sqlite3 *db, const char *sql) {
    return sqlite3_exec(db, sql, 0, 0, 0);
}

static long long count(sqlite3 *db) {
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &st, 0) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static const char *text(sqlite3 *db, const char *sql, char *buf, size_t n) {
    sqlite3_stmt *st;
    CHECK(sqlite3_prepare_v2(db, sql, -1, &st, 0) == SQLITE_OK);
    CHECK(sqlite3_step(st) == SQLITE_ROW);
    snprintf(buf, n, "%s", (const char *)sqlite3_column_text(st, 0));
    for (int i = 1; i < sqlite3_column_count(st); i++)
        snprintf(buf + strlen(buf), n - strlen(buf), "|%s", (const char *)sqlite3_column_text(st, i));
    sqlite3_finalize(st);
    return buf;
}

/* A child running this program with ROLE; its stdin and stdout are pipes to this process. */
struct child { pid_t pid; FILE *to, *from; };

static struct child spawn(const char *self, const char *role) {
    int in[2], out[2];
    CHECK(pipe(in) == 0 && pipe(out) == 0);
    fflush(0);
    struct child c;
    c.pid = fork();
    CHECK(c.pid >= 0);
    if (c.pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]); close(in[1]); close(out[0]); close(out[1]);
        execl(self, self, store, jm, stock ? "stock" : "txvfs", role, (char *)0);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c.to = fdopen(in[1], "w");
    c.from = fdopen(out[0], "r");
    return c;
}

static void expect(FILE *f, const char *want) {
    char line[256] = "";
    CHECK(fgets(line, sizeof line, f) != 0);
    line[strcspn(line, "\n")] = 0;
    if (strcmp(line, want) != 0) {
        fprintf(stderr, "expected '%s', got '%s'\n", want, line);
        exit(1);
    }
}

static void finish(struct child c) {
    fclose(c.to);
    fclose(c.from);
    int status;
    CHECK(waitpid(c.pid, &status, 0) == c.pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static int role(const char *r) {
    if (strcmp(r, "write") == 0) {
        sqlite3 *w = open_db(stock ? 2000 : 30000);
        int rc = exec(w, "INSERT INTO t VALUES ('from the writer')");
        printf("write %d\n", rc);
        CHECK(sqlite3_close(w) == SQLITE_OK);
        return 0;
    }
    CHECK(strcmp(r, "hold") == 0);
    sqlite3 *w = open_db(30000);
    CHECK(exec(w, "BEGIN EXCLUSIVE; INSERT INTO t VALUES ('uncommitted')") == SQLITE_OK);
    printf("holding\n");
    fflush(stdout);
    char line[64];
    CHECK(fgets(line, sizeof line, stdin) != 0 && strcmp(line, "commit\n") == 0);
    CHECK(exec(w, "COMMIT") == SQLITE_OK);
    printf("committed %lld\n", count(w));
    CHECK(sqlite3_close(w) == SQLITE_OK);
    return 0;
}

int main(int argc, char **argv) {
    CHECK(argc >= 2);
    store = argv[1];
    if (argc > 2) jm = argv[2];
    stock = argc > 3 && strcmp(argv[3], "stock") == 0;
    if (!stock) CHECK(txvfs_sqlite_register(0) == SQLITE_OK);
    if (argc > 4) return role(argv[4]);

    sqlite3 *r = open_db(0);
    CHECK(exec(r, "CREATE TABLE t(v); INSERT INTO t VALUES ('one')") == SQLITE_OK);

    /* 1. The writer runs to its end while this read transaction is open. */
    CHECK(exec(r, "BEGIN") == SQLITE_OK);
    CHECK(count(r) == 1);
    struct child w = spawn(argv[0], "write");
    expect(w.from, "write 0");
    finish(w);
    CHECK(count(r) == 1);
    CHECK(exec(r, "INSERT INTO t VALUES ('from the stale reader')") == SQLITE_BUSY_SNAPSHOT);
    CHECK(exec(r, "ROLLBACK") == SQLITE_OK);
    CHECK(count(r) == 2);
    CHECK(exec(r, "INSERT INTO t VALUES ('from the reader')") == SQLITE_OK);
    CHECK(count(r) == 3);

    /* 2. Another process holds EXCLUSIVE with an uncommitted row. */
    struct child h = spawn(argv[0], "hold");
    expect(h.from, "holding");
    CHECK(count(r) == 3);
    CHECK(exec(r, "BEGIN IMMEDIATE") == SQLITE_BUSY);
    if (sqlite3_get_autocommit(r) == 0) CHECK(exec(r, "ROLLBACK") == SQLITE_OK);
    fprintf(h.to, "commit\n");
    fflush(h.to);
    expect(h.from, "committed 4");
    finish(h);
    CHECK(count(r) == 4);
    CHECK(exec(r, "INSERT INTO t VALUES ('after the holder')") == SQLITE_OK);
    char buf[256];
    CHECK(strcmp(text(r, "PRAGMA integrity_check", buf, sizeof buf), "ok") == 0);

    /* 3. journal_mode=WAL is accepted, remembered, checkpointed (nothing to copy) and undone. */
    if (!stock) {
        CHECK(strcmp(text(r, "PRAGMA journal_mode=WAL", buf, sizeof buf), "wal") == 0);
        CHECK(strcmp(text(r, "PRAGMA wal_checkpoint", buf, sizeof buf), "0|-1|-1") == 0);
        CHECK(strcmp(text(r, "PRAGMA journal_size_limit=65536", buf, sizeof buf), "65536") == 0);
        const char *mode = jm;
        jm = 0; /* a connection that sets no mode reads the database's */
        sqlite3 *other = open_db(0);
        jm = mode;
        CHECK(strcmp(text(other, "PRAGMA journal_mode", buf, sizeof buf), "wal") == 0);
        CHECK(strcmp(text(other, "PRAGMA journal_mode=DELETE", buf, sizeof buf), "delete") == 0);
        /* r's pager kept the rollback mode it had under the VFS's "wal" (delete by default). */
        const char *back = strcmp(mode, "wal") == 0 ? "delete" : mode;
        CHECK(strcmp(text(r, "PRAGMA journal_mode", buf, sizeof buf), back) == 0);
        CHECK(count(other) == 5 && count(r) == 5);
        CHECK(sqlite3_close(other) == SQLITE_OK);
    }
    CHECK(sqlite3_close(r) == SQLITE_OK);
    printf("readers_writers.c (%s, %s): the writer committed during the read, BUSY_SNAPSHOT after; "
           "BEGIN EXCLUSIVE kept a writer out, not a reader\n", stock ? "stock" : "txvfs", jm);
    return 0;
}
