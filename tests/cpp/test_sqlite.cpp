// Rows and files in one commit (issue 40): a SQLite write transaction through libtxvfs's VFS
// (txvfs_sqlite_vfs_register) and the store's files, joined by token (PRAGMA txvfs_files,
// txvfs_tx_join), commit together or not at all; the C++ helper txvfs::sqlite::transact
// retries a conflicting unit. Linked with the system SQLite (-lsqlite3).
#include "support.hpp"

#include <txvfs_sqlite.hpp>

#include <cstring>
#include <sqlite3.h>
#include <string>

namespace {

/** A connection to database `path` of the RocksDB store in `dir`, through the VFS "txvfs". */
struct Db {
    sqlite3 *db = nullptr;
    Db(const std::string &dir, const char *path = "/app.db") {
        REQUIRE(txvfs_sqlite_vfs_register(false) == 0);
        std::string uri = std::string("file:") + path + "?vfs=txvfs&store=" + dir;
        int rc = sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, nullptr);
        INFO(sqlite3_errmsg(db));
        REQUIRE(rc == SQLITE_OK);
        sqlite3_busy_timeout(db, 5000);
    }
    ~Db() { sqlite3_close(db); }
    Db(const Db &) = delete;
    Db &operator=(const Db &) = delete;
    operator sqlite3 *() const { return db; }

    /** Runs sql, returning SQLite's result code (the message goes to INFO). */
    int exec(const char *sql) const {
        char *msg = nullptr;
        int rc = sqlite3_exec(db, sql, nullptr, nullptr, &msg);
        if (msg) UNSCOPED_INFO(sql << ": " << msg);
        sqlite3_free(msg);
        return rc;
    }
    void ok(const char *sql) const { REQUIRE(exec(sql) == SQLITE_OK); }
    /** The first column of the first row of a query, as text ("<none>" without a row). */
    std::string one(const char *sql) const {
        sqlite3_stmt *st = nullptr;
        REQUIRE(sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK);
        int rc = sqlite3_step(st);
        std::string out = "<none>";
        if (rc == SQLITE_ROW) out = reinterpret_cast<const char *>(sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        return out;
    }
    /** PRAGMA txvfs_files, requiring success. */
    std::string token() const {
        std::string t = one("PRAGMA txvfs_files");
        REQUIRE(t.rfind("txvfs-tx-", 0) == 0);
        return t;
    }
};

/** Joins `token` on `s`, requiring success. */
txvfs_tx *join(txvfs_store *s, const std::string &token) {
    txvfs_tx *tx = nullptr;
    int rc = txvfs_tx_join(s, token.c_str(), &tx);
    INFO(txvfs_last_error());
    REQUIRE(rc == 0);
    return tx;
}

} // namespace

TEST_CASE("sqlite: rows and files commit together, and before COMMIT nobody sees either", "[sqlite]") {
    TempDir d;
    Store s(d.path);
    Db db(d.path), other(d.path);
    db.ok("CREATE TABLE photos(name TEXT PRIMARY KEY)");
    db.ok("BEGIN IMMEDIATE");
    std::string token = db.token();
    REQUIRE(db.token() == token); // one file transaction per write transaction
    txvfs_tx *files = join(s, token);
    OK(txvfs_mkdir_all(s, files, "/photos", 0755));
    put(s, "/photos/a.jpg", "jpeg bytes", files);
    db.ok("INSERT INTO photos VALUES ('a.jpg')");
    REQUIRE(get(s, "/photos/a.jpg", files) == "jpeg bytes"); // its own writes
    // Isolation: the store's API (auto-commit) does not see the file, another connection
    // does not see the row.
    REQUIRE(get(s, "/photos/a.jpg") == "<error " + std::to_string(-ENOENT) + ">");
    REQUIRE(other.one("SELECT count(*) FROM photos") == "0");
    db.ok("COMMIT");
    REQUIRE(get(s, "/photos/a.jpg") == "jpeg bytes");
    REQUIRE(other.one("SELECT count(*) FROM photos") == "1");
    REQUIRE(txvfs_tx_joined_commit_error(token.c_str()) == 0);
    // The handle outlives its transaction: every call fails with -EINVAL; freeing is fine.
    REQUIRE(txvfs_write_file(s, files, "/late", "x", 1) == -EINVAL);
    REQUIRE(std::string(txvfs_last_error()).find("already committed or rolled back") != std::string::npos);
    txvfs_tx_free(files);
    // The token died with its transaction.
    REQUIRE(txvfs_tx_join(s, token.c_str(), &files) == -ENOENT);
}

TEST_CASE("sqlite: ROLLBACK drops the rows and the files", "[sqlite]") {
    TempDir d;
    Store s(d.path);
    Db db(d.path);
    db.ok("CREATE TABLE t(name TEXT)");
    db.ok("BEGIN IMMEDIATE");
    txvfs_tx *files = join(s, db.token());
    put(s, "/f", "never", files);
    db.ok("INSERT INTO t VALUES ('f')");
    db.ok("ROLLBACK");
    REQUIRE(get(s, "/f") == "<error " + std::to_string(-ENOENT) + ">");
    REQUIRE(db.one("SELECT count(*) FROM t") == "0");
    REQUIRE(txvfs_write_file(s, files, "/g", "x", 1) == -EINVAL);
    txvfs_tx_free(files);
    // A file transaction that changed nothing commits too (a COMMIT with no page written).
    db.ok("BEGIN IMMEDIATE");
    files = join(s, db.token());
    put(s, "/only-a-file", "1", files);
    db.ok("COMMIT");
    txvfs_tx_free(files);
    REQUIRE(get(s, "/only-a-file") == "1");
}

TEST_CASE("sqlite: the joined handle cannot commit or roll back, tokens of other stores", "[sqlite]") {
    TempDir d, d2;
    Store s(d.path), s2(d2.path), again(d.path);
    Db db(d.path);
    db.ok("CREATE TABLE t(v)");
    db.ok("BEGIN IMMEDIATE");
    std::string token = db.token();
    txvfs_tx *files = join(s, token);
    put(s, "/kept", "1", files);
    for (int i = 0; i < 2; i++) { // refused, and refused again (not taken as ended)
        REQUIRE(txvfs_tx_rollback(files) == -EINVAL);
        REQUIRE(std::string(txvfs_last_error()).find("roll back a joined transaction") != std::string::npos);
        REQUIRE(txvfs_tx_commit(files) == -EINVAL);
        REQUIRE(std::string(txvfs_last_error()).find("commit a joined transaction") != std::string::npos);
    }
    REQUIRE(get(s, "/kept", files) == "1"); // still open and usable
    // A handle of another store: -EXDEV; another handle on the same store joins.
    txvfs_tx *x = nullptr;
    REQUIRE(txvfs_tx_join(s2, token.c_str(), &x) == -EXDEV);
    REQUIRE(std::string(txvfs_last_error()).find("belongs to store") != std::string::npos);
    REQUIRE(x == nullptr);
    txvfs_tx *second = join(again, token);
    REQUIRE(get(again, "/kept", second) == "1");
    txvfs_tx_free(second); // ends nothing
    // The joined handle with the wrong store handle is -EXDEV, as for any transaction.
    REQUIRE(txvfs_write_file(s2, files, "/x", "x", 1) == -EXDEV);
    db.ok("INSERT INTO t VALUES (1)");
    db.ok("COMMIT");
    txvfs_tx_free(files);
    REQUIRE(get(s, "/kept") == "1");
}

TEST_CASE("sqlite: PRAGMA txvfs_files needs a write transaction", "[sqlite]") {
    TempDir d;
    Db db(d.path);
    db.ok("CREATE TABLE t(v)");
    REQUIRE(db.exec("PRAGMA txvfs_files") == SQLITE_ERROR);
    REQUIRE(std::string(sqlite3_errmsg(db)).find("BEGIN IMMEDIATE") != std::string::npos);
    db.ok("BEGIN"); // deferred: no lock yet
    REQUIRE(db.exec("PRAGMA txvfs_files") == SQLITE_ERROR);
    db.ok("SELECT * FROM t"); // a read transaction
    REQUIRE(db.exec("PRAGMA txvfs_files") == SQLITE_ERROR);
    db.ok("INSERT INTO t VALUES (1)"); // now a write transaction
    REQUIRE(db.exec("PRAGMA txvfs_files") == SQLITE_OK);
    db.ok("COMMIT");
}

TEST_CASE("sqlite: a conflict fails COMMIT (retryable) and rolls back rows and files", "[sqlite]") {
    TempDir d;
    Store s(d.path);
    Db db(d.path);
    db.ok("CREATE TABLE t(v)");
    put(s, "/counter", "1");
    db.ok("BEGIN IMMEDIATE");
    std::string token = db.token();
    txvfs_tx *files = join(s, token);
    REQUIRE(get(s, "/counter", files) == "1"); // the unit reads the file ...
    put(s, "/counter", "2");                   // ... another transaction changes it
    put(s, "/mine", "x", files);
    db.ok("INSERT INTO t VALUES ('row')");
    int rc = db.exec("COMMIT");
    REQUIRE((rc & 0xff) == SQLITE_IOERR);
    REQUIRE(txvfs_tx_joined_commit_error(token.c_str()) == -TXVFS_ECONFLICT);
    REQUIRE(std::strlen(txvfs_last_error()) > 0);
    if (!sqlite3_get_autocommit(db)) db.ok("ROLLBACK");
    txvfs_tx_free(files);
    REQUIRE(get(s, "/mine") == "<error " + std::to_string(-ENOENT) + ">");
    REQUIRE(db.one("SELECT count(*) FROM t") == "0");
    REQUIRE(get(s, "/counter") == "2");
    // The connection works on.
    db.ok("INSERT INTO t VALUES ('next')");
    REQUIRE(db.one("SELECT count(*) FROM t") == "1");
}

TEST_CASE("sqlite: txvfs::sqlite::transact commits, rolls back on an exception, retries a conflict", "[sqlite][wrapper]") {
    TempDir d;
    txvfs::sqlite::register_vfs();
    txvfs::store s = txvfs::store::open(d.path);
    Db db(d.path);
    db.ok("CREATE TABLE photos(name TEXT PRIMARY KEY, size INTEGER)");

    int n = txvfs::sqlite::transact(db, s, [&](txvfs::transaction &files) {
        files.write_file("/a.jpg", std::string("0123456789"));
        txvfs::sqlite::exec(db, "INSERT INTO photos VALUES ('a.jpg', 10)");
        return 1;
    });
    REQUIRE(n == 1);
    REQUIRE(s.read_file("/a.jpg") == "0123456789");
    REQUIRE(db.one("SELECT size FROM photos WHERE name = 'a.jpg'") == "10");

    // An exception drops both and propagates; the connection is out of its transaction.
    REQUIRE_THROWS_WITH(txvfs::sqlite::transact(db, s, [&](txvfs::transaction &files) {
        files.write_file("/b.jpg", std::string("b"));
        txvfs::sqlite::exec(db, "INSERT INTO photos VALUES ('b.jpg', 1)");
        throw std::runtime_error("changed my mind");
    }), "changed my mind");
    REQUIRE(sqlite3_get_autocommit(db) != 0);
    REQUIRE_FALSE(s.exists("/b.jpg"));
    REQUIRE(db.one("SELECT count(*) FROM photos") == "1");
    // A failing statement too (a duplicate key): SQLite's error, nothing kept.
    try {
        txvfs::sqlite::transact(db, s, [&](txvfs::transaction &files) {
            files.write_file("/c.jpg", std::string("c"));
            txvfs::sqlite::exec(db, "INSERT INTO photos VALUES ('a.jpg', 0)");
        });
        FAIL("no exception");
    } catch (const txvfs::sqlite::error &e) {
        REQUIRE((e.code() & 0xff) == SQLITE_CONSTRAINT);
    }
    REQUIRE_FALSE(s.exists("/c.jpg"));

    // A conflict: the first run reads /count, another transaction changes it before COMMIT;
    // the helper runs the unit again, which sees the new value and commits.
    s.write_file("/count", std::string("5"));
    int runs = 0;
    std::string seen = txvfs::sqlite::transact(db, s, [&](txvfs::transaction &files) {
        runs++;
        std::string v = files.read_file("/count");
        if (runs == 1) s.write_file("/count", std::string("6"));
        files.write_file("/count", v + "+1");
        std::string sql = "INSERT INTO photos VALUES ('count " + v + "', " + std::to_string(runs) + ")";
        txvfs::sqlite::exec(db, sql.c_str());
        return v;
    });
    REQUIRE(runs == 2);
    REQUIRE(seen == "6");
    REQUIRE(s.read_file("/count") == "6+1");
    REQUIRE(db.one("SELECT group_concat(name) FROM photos WHERE name LIKE 'count%'") == "count 6");

    // With no retries left, the conflict is thrown as txvfs's error, and nothing is kept.
    runs = 0;
    try {
        txvfs::sqlite::transact(db, s, [&](txvfs::transaction &files) {
            runs++;
            files.read_file("/count");
            s.write_file("/count", std::to_string(runs));
            files.write_file("/lost", std::string("x"));
            txvfs::sqlite::exec(db, "INSERT INTO photos VALUES ('lost', 0)");
        }, 2);
        FAIL("no exception");
    } catch (const txvfs::error &e) {
        REQUIRE(e.code() == -TXVFS_ECONFLICT);
        REQUIRE(e.retryable());
    }
    REQUIRE(runs == 3);
    REQUIRE_FALSE(s.exists("/lost"));
    REQUIRE(db.one("SELECT count(*) FROM photos WHERE name = 'lost'") == "0");

    // transaction::join directly, and PRAGMA txvfs_files outside a write transaction.
    REQUIRE_THROWS_AS(txvfs::sqlite::files_token(db), txvfs::sqlite::error);
    txvfs::sqlite::exec(db, "BEGIN IMMEDIATE");
    {
        txvfs::transaction files = txvfs::transaction::join(s, txvfs::sqlite::files_token(db));
        files.write_file("/joined", std::string("j"));
        REQUIRE_THROWS_AS(files.commit(), txvfs::error);
    }
    txvfs::sqlite::exec(db, "COMMIT");
    REQUIRE(s.read_file("/joined") == "j");
    try {
        txvfs::transaction::join(s, "txvfs-tx-0-0");
        FAIL("no exception");
    } catch (const txvfs::error &e) {
        REQUIRE(e.code() == -ENOENT);
    }
}
