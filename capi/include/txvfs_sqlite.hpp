/*
 * txvfs: SQLite rows and store files in one commit, for C++17 (header-only; needs sqlite3.h
 * and a program linked with -ltxvfs -lsqlite3).
 *
 *   txvfs::sqlite::register_vfs();                        // once: VFS "txvfs" of libtxvfs
 *   txvfs::store s = txvfs::store::open("/path/to/store");
 *   sqlite3 *db;                                          // a database file of the same store
 *   sqlite3_open_v2("file:/index.db?vfs=txvfs&store=/path/to/store", &db,
 *                   SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, nullptr);
 *   txvfs::sqlite::transact(db, s, [&](txvfs::transaction &files) {   // retried on conflict
 *       txvfs::sqlite::exec(db, "INSERT INTO photos VALUES ('a.jpg')");
 *       files.write_file("/photos/a.jpg", jpeg);
 *   });                                                   // the row and the file, or neither
 */
#ifndef TXVFS_SQLITE_HPP
#define TXVFS_SQLITE_HPP

#include "txvfs.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <thread>

namespace txvfs {
namespace sqlite {

/** A failed SQLite call: code() is SQLite's (extended) result code, what() its message. */
class error : public std::runtime_error {
public:
    error(int code, const std::string &message) : std::runtime_error(message), code_(code) {}
    int code() const noexcept { return code_; }

private:
    int code_;
};

/** Registers libtxvfs's VFS "txvfs" with the program's SQLite (txvfs_sqlite_vfs_register). */
inline void register_vfs(bool make_default = false) { detail::check(txvfs_sqlite_vfs_register(make_default)); }

/** Runs sql (one or more statements) on db; throws txvfs::sqlite::error. */
inline void exec(sqlite3 *db, const char *sql) {
    char *msg = nullptr;
    int rc = sqlite3_exec(db, sql, nullptr, nullptr, &msg);
    if (rc != SQLITE_OK) {
        std::string m = std::string(sql) + ": " + (msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        throw error(sqlite3_extended_errcode(db), m);
    }
}

/**
 * The token of the file transaction of the write transaction db is in (PRAGMA txvfs_files),
 * for transaction::join. Throws txvfs::sqlite::error outside a write transaction.
 */
inline std::string files_token(sqlite3 *db) {
    sqlite3_stmt *st = nullptr;
    int rc = sqlite3_prepare_v2(db, "PRAGMA txvfs_files", -1, &st, nullptr);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        error e(sqlite3_extended_errcode(db), std::string("PRAGMA txvfs_files: ") + sqlite3_errmsg(db));
        sqlite3_finalize(st);
        throw e;
    }
    const unsigned char *t = sqlite3_column_text(st, 0);
    std::string token = t ? reinterpret_cast<const char *>(t) : "";
    sqlite3_finalize(st);
    return token;
}

/**
 * Runs f(files) as one unit with the rows f writes through db: BEGIN IMMEDIATE, joins the
 * write transaction's file transaction (files, on store s, which holds db's file), runs f,
 * COMMIT: rows and files commit together or not at all. When the commit conflicts with
 * another transaction (or f throws a retryable txvfs::error), it rolls back and runs f again,
 * with backoff, up to max_retries times, so f must have no effects outside db and files.
 * Any other exception from f rolls both back and propagates; a failed COMMIT throws
 * txvfs::error (txvfs's reason, from txvfs_tx_joined_commit_error) or txvfs::sqlite::error.
 * db must not be in a transaction already.
 */
template <class F>
auto transact(sqlite3 *db, const store &s, F &&f, unsigned max_retries = 100)
    -> decltype(f(std::declval<transaction &>())) {
    auto rollback = [db] {
        if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    };
    for (unsigned attempt = 0;; ++attempt) {
        if (attempt > 0) // exponential backoff from 1 ms to 100 ms
            std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1u << std::min(attempt, 7u), 100u)));
        exec(db, "BEGIN IMMEDIATE");
        std::string token;
        try {
            token = files_token(db);
            transaction files = transaction::join(s, token);
            if constexpr (std::is_void_v<decltype(f(files))>) {
                f(files);
                exec(db, "COMMIT");
                return;
            } else {
                auto result = f(files);
                exec(db, "COMMIT");
                return result;
            }
        } catch (const txvfs::error &e) {
            rollback();
            if (!e.retryable() || attempt >= max_retries) throw;
        } catch (const error &) {
            rollback();
            // SQLite reports a failed commit as an I/O error; txvfs knows why.
            int why = token.empty() ? 0 : txvfs_tx_joined_commit_error(token.c_str());
            if (why == 0) throw;
            txvfs::error reason(why, txvfs_last_error());
            if (!reason.retryable() || attempt >= max_retries) throw reason;
        } catch (...) {
            rollback();
            throw;
        }
    }
}

} // namespace sqlite
} // namespace txvfs

#endif /* TXVFS_SQLITE_HPP */
