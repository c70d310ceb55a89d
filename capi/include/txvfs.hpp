/*
 * txvfs: C++17 wrapper over the C API (txvfs.h). Header-only.
 *
 * RAII owners for the store, options, transactions and open files; failures throw
 * txvfs::error with the (negative) code and the message of txvfs_last_error(). Paths are
 * std::string_view; buffers are span-like views (any contiguous container, or pointer + size).
 *
 *   txvfs::store s = txvfs::store::open("memory:");
 *   txvfs::transact(s, [](txvfs::transaction& tx) {    // retried on conflict
 *       tx.write_file("/a.txt", "part one");
 *       tx.write_file("/b.txt", "part two");
 *   });
 *   std::string b = s.read_file("/b.txt");
 */
#ifndef TXVFS_HPP
#define TXVFS_HPP

#include "txvfs.h"

#include <cerrno>
#include <chrono>
#include <fcntl.h> // the O_... flags of filesystem::open
#include <cstddef>
#include <cstdint>
#include <exception>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace txvfs {

/** A failed call: code() is the negative errno or -TXVFS_E... code the C function returned. */
class error : public std::runtime_error {
public:
    error(int code, const std::string &message) : std::runtime_error(message), code_(code) {}
    /** The negative code, as the C API returns it (e.g. -ENOENT). */
    int code() const noexcept { return code_; }
    /** True for conflicts (-TXVFS_ECONFLICT, -TXVFS_ETOOOLD): running the transaction again may succeed. */
    bool retryable() const noexcept { return code_ == -TXVFS_ECONFLICT || code_ == -TXVFS_ETOOOLD; }

private:
    int code_;
};

namespace detail {

/** Throws txvfs::error for a negative return code. */
inline void check(int rc) {
    if (rc < 0) throw error(rc, txvfs_last_error());
}

/** A NUL-terminated copy of a string_view, for the C API. */
class cstr {
public:
    explicit cstr(std::string_view s) : s_(s) {}
    operator const char *() const noexcept { return s_.c_str(); }

private:
    std::string s_;
};

template <class C, class = void>
struct is_contiguous : std::false_type {};
template <class C>
struct is_contiguous<C, std::void_t<decltype(std::data(std::declval<C &>())), decltype(std::size(std::declval<C &>()))>>
    : std::bool_constant<!std::is_array_v<std::remove_reference_t<C>>> {};

} // namespace detail

/** A read-only byte view (span-like): a string_view, any contiguous container, or pointer + size. */
class bytes_view {
public:
    bytes_view() noexcept = default;
    bytes_view(const void *data, std::size_t size) noexcept : data_(data), size_(size) {}
    bytes_view(std::string_view s) noexcept : data_(s.data()), size_(s.size()) {}
    bytes_view(const char *s) noexcept : bytes_view(std::string_view(s)) {}
    template <class C, std::enable_if_t<detail::is_contiguous<const C>::value, int> = 0>
    bytes_view(const C &c) noexcept
        : data_(std::data(c)), size_(std::size(c) * sizeof(*std::data(c))) {}
    const void *data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }

private:
    const void *data_ = nullptr;
    std::size_t size_ = 0;
};

/** A writable byte view (span-like): any contiguous container of bytes, or pointer + size. */
class mutable_bytes {
public:
    mutable_bytes(void *data, std::size_t size) noexcept : data_(data), size_(size) {}
    template <class C, std::enable_if_t<detail::is_contiguous<C>::value &&
                                            !std::is_const_v<std::remove_pointer_t<decltype(std::data(std::declval<C &>()))>>,
                                        int> = 0>
    mutable_bytes(C &c) noexcept : data_(std::data(c)), size_(std::size(c) * sizeof(*std::data(c))) {}
    void *data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }

private:
    void *data_;
    std::size_t size_;
};

/** One directory entry. */
struct dirent {
    std::string name;
    std::uint64_t ino;
    /** TXVFS_DT_REG, TXVFS_DT_DIR or TXVFS_DT_LNK. */
    std::uint8_t type;
};

/** Options for store::open (an RAII owner of txvfs_options). */
class options {
public:
    options() { detail::check(txvfs_options_new(&o_)); }
    options(const options &) = delete;
    options &operator=(const options &) = delete;
    options(options &&other) noexcept : o_(std::exchange(other.o_, nullptr)) {}
    options &operator=(options &&other) noexcept {
        std::swap(o_, other.o_);
        return *this;
    }
    ~options() { txvfs_options_free(o_); }

    options &sync(bool v) { return set(txvfs_options_set_sync(o_, v)); }
    options &block_size(std::uint32_t v) { return set(txvfs_options_set_block_size(o_, v)); }
    options &inline_limit(std::uint32_t v) { return set(txvfs_options_set_inline_limit(o_, v)); }
    options &read_only(bool v) { return set(txvfs_options_set_read_only(o_, v)); }
    options &max_retries(std::uint32_t v) { return set(txvfs_options_set_max_retries(o_, v)); }
    options &credential(std::uint32_t uid, std::uint32_t gid, const std::vector<std::uint32_t> &groups = {}) {
        return set(txvfs_options_set_credential(o_, uid, gid, groups.data(), groups.size()));
    }
    const txvfs_options *get() const noexcept { return o_; }

private:
    options &set(int rc) {
        detail::check(rc);
        return *this;
    }
    txvfs_options *o_ = nullptr;
};

class file;

/**
 * The file-system calls, shared by store (auto-commit: each call is a transaction by itself)
 * and transaction (calls belong to it).
 */
class filesystem {
public:
    txvfs_attr stat(std::string_view path) const { return get<txvfs_attr>(txvfs_stat, path); }
    txvfs_attr lstat(std::string_view path) const { return get<txvfs_attr>(txvfs_lstat, path); }
    bool exists(std::string_view path) const { return get<bool>(txvfs_exists, path); }
    void mkdir(std::string_view path, std::uint32_t mode = 0755) const {
        detail::check(txvfs_mkdir(s_, t_, detail::cstr(path), mode));
    }
    void mkdir_all(std::string_view path, std::uint32_t mode = 0755) const {
        detail::check(txvfs_mkdir_all(s_, t_, detail::cstr(path), mode));
    }
    void rmdir(std::string_view path) const { detail::check(txvfs_rmdir(s_, t_, detail::cstr(path))); }
    void unlink(std::string_view path) const { detail::check(txvfs_unlink(s_, t_, detail::cstr(path))); }
    /** flags: 0, TXVFS_RENAME_NOREPLACE or TXVFS_RENAME_EXCHANGE. */
    void rename(std::string_view from, std::string_view to, std::uint32_t flags = 0) const {
        detail::check(txvfs_rename(s_, t_, detail::cstr(from), detail::cstr(to), flags));
    }
    void link(std::string_view from, std::string_view to) const {
        detail::check(txvfs_link(s_, t_, detail::cstr(from), detail::cstr(to)));
    }
    void symlink(std::string_view target, std::string_view linkpath) const {
        detail::check(txvfs_symlink(s_, t_, detail::cstr(target), detail::cstr(linkpath)));
    }
    std::string readlink(std::string_view path) const {
        detail::cstr p(path);
        return fetch([&](char *buf, std::size_t cap, std::size_t *n) { return txvfs_readlink(s_, t_, p, buf, cap, n); }, 1);
    }
    void chmod(std::string_view path, std::uint32_t mode) const {
        detail::check(txvfs_chmod(s_, t_, detail::cstr(path), mode));
    }
    /** TXVFS_ID_UNCHANGED keeps one of them. */
    void chown(std::string_view path, std::uint32_t uid, std::uint32_t gid) const {
        detail::check(txvfs_chown(s_, t_, detail::cstr(path), uid, gid));
    }
    /** Times in ns since the epoch, or TXVFS_UTIME_NOW / TXVFS_UTIME_OMIT. */
    void utimens(std::string_view path, std::int64_t atime_ns, std::int64_t mtime_ns) const {
        detail::check(txvfs_utimens(s_, t_, detail::cstr(path), atime_ns, mtime_ns));
    }
    void truncate(std::string_view path, std::uint64_t size) const {
        detail::check(txvfs_truncate(s_, t_, detail::cstr(path), size));
    }
    /** The whole directory, in name order, read page by page with the cursor. */
    std::vector<dirent> readdir(std::string_view path) const {
        detail::cstr p(path);
        std::vector<dirent> out;
        std::vector<txvfs_dirent> page(256);
        std::string after;
        for (;;) {
            std::size_t n = 0;
            detail::check(txvfs_readdir(s_, t_, p, out.empty() ? nullptr : after.c_str(), page.data(), page.size(), &n));
            for (std::size_t i = 0; i < n; i++)
                out.push_back(dirent{std::string(page[i].name, page[i].name_len), page[i].ino, page[i].type});
            if (n < page.size()) return out;
            after = out.back().name;
        }
    }
    std::string read_file(std::string_view path) const {
        detail::cstr p(path);
        return fetch([&](char *buf, std::size_t cap, std::size_t *n) { return txvfs_read_file(s_, t_, p, buf, cap, n); }, 0);
    }
    void write_file(std::string_view path, bytes_view data) const {
        detail::check(txvfs_write_file(s_, t_, detail::cstr(path), data.data(), data.size()));
    }
    std::string getxattr(std::string_view path, std::string_view name) const {
        detail::cstr p(path), n(name);
        return fetch([&](char *buf, std::size_t cap, std::size_t *len) { return txvfs_getxattr(s_, t_, p, n, buf, cap, len); }, 0);
    }
    /** flags: 0, TXVFS_XATTR_CREATE or TXVFS_XATTR_REPLACE. */
    void setxattr(std::string_view path, std::string_view name, bytes_view value, int flags = 0) const {
        detail::check(txvfs_setxattr(s_, t_, detail::cstr(path), detail::cstr(name), value.data(), value.size(), flags));
    }
    std::vector<std::string> listxattr(std::string_view path) const {
        detail::cstr p(path);
        std::string all = fetch([&](char *buf, std::size_t cap, std::size_t *n) { return txvfs_listxattr(s_, t_, p, buf, cap, n); }, 0);
        std::vector<std::string> names;
        for (std::size_t start = 0; start < all.size();) {
            std::size_t end = all.find('\0', start);
            names.push_back(all.substr(start, end - start));
            start = end + 1;
        }
        return names;
    }
    void removexattr(std::string_view path, std::string_view name) const {
        detail::check(txvfs_removexattr(s_, t_, detail::cstr(path), detail::cstr(name)));
    }
    txvfs_usage statfs() const {
        txvfs_usage u;
        detail::check(txvfs_statfs(s_, t_, &u));
        return u;
    }
    /** Sets or changes the quota of the tree at `path` (0: that limit not set); a commit that
        would pass a limit fails with EDQUOT, a rename or link across trees with EXDEV. */
    void quota_set(std::string_view path, std::uint64_t bytes_limit, std::uint64_t inodes_limit) const {
        detail::check(txvfs_quota_set(s_, t_, detail::cstr(path), bytes_limit, inodes_limit));
    }
    /** The innermost quota tree `path` is in, if any. */
    std::optional<txvfs_quota> quota(std::string_view path) const {
        bool found = false;
        txvfs_quota q{};
        detail::check(txvfs_quota_get(s_, t_, detail::cstr(path), &found, &q));
        return found ? std::optional<txvfs_quota>(q) : std::nullopt;
    }
    /** Removes the quota of the tree whose top is `path` (ENOENT if none). */
    void quota_remove(std::string_view path) const {
        detail::check(txvfs_quota_remove(s_, t_, detail::cstr(path)));
    }
    /** Opens with POSIX open(2) flags (O_RDONLY, O_CREAT, ... | TXVFS_O_WRITE_BACK). */
    file open(std::string_view path, int flags, std::uint32_t mode = 0644) const;

    txvfs_store *store_handle() const noexcept { return s_; }
    txvfs_tx *tx_handle() const noexcept { return t_; }

protected:
    filesystem(txvfs_store *s, txvfs_tx *t) noexcept : s_(s), t_(t) {}
    txvfs_store *s_;
    txvfs_tx *t_;

private:
    template <class T, class F>
    T get(F f, std::string_view path) const {
        T out;
        detail::check(f(s_, t_, detail::cstr(path), &out));
        return out;
    }
    /** Size query, then fill; retries if the value grew in between. */
    template <class F>
    static std::string fetch(F f, std::size_t nul) {
        for (;;) {
            std::size_t n = 0;
            detail::check(f(nullptr, 0, &n));
            std::string s(n + nul, '\0');
            int rc = f(s.data(), s.size(), &n);
            if (rc == -ERANGE) continue;
            detail::check(rc);
            s.resize(n);
            return s;
        }
    }
};

class transaction;

/**
 * An open store (owns a reference to txvfs_store; move-only). Thread-safe. Its files and
 * transactions hold references of their own, so they may outlive it (returned from the
 * function that opened the store, say): the store stays open until the last of them is gone.
 */
class store : public filesystem {
public:
    /** Opens "memory:", "rocksdb:/path" or a bare path (RocksDB). */
    static store open(std::string_view uri) { return open_with(uri, nullptr); }
    static store open(std::string_view uri, const options &o) { return open_with(uri, o.get()); }
    /** Opening files: filesystem::open (a store and its files share the name). */
    using filesystem::open;

    store(const store &) = delete;
    store &operator=(const store &) = delete;
    store(store &&other) noexcept : filesystem(std::exchange(other.s_, nullptr), nullptr) {}
    store &operator=(store &&other) noexcept {
        std::swap(s_, other.s_);
        return *this;
    }
    ~store() { txvfs_store_free(s_); }

    /** Starts an explicit transaction; it rolls back when destroyed uncommitted. */
    transaction begin() const;
    /** Makes every committed change durable. */
    void sync() const { detail::check(txvfs_store_sync(s_)); }
    std::uint32_t block_size() const {
        std::uint32_t v;
        detail::check(txvfs_store_block_size(s_, &v));
        return v;
    }
    std::uint32_t inline_limit() const {
        std::uint32_t v;
        detail::check(txvfs_store_inline_limit(s_, &v));
        return v;
    }
    /** A read-only snapshot of the whole tree as it is now (txvfs_store_snapshot). */
    store snapshot() const {
        txvfs_store *s = nullptr;
        detail::check(txvfs_store_snapshot(s_, &s));
        return store(s);
    }
    /** Keeps a named snapshot that survives reopening; it opens read-only as
     *  "rocksdb:PATH?snapshot=NAME" (txvfs_snapshot_create). */
    void create_snapshot(std::string_view name) const { detail::check(txvfs_snapshot_create(s_, detail::cstr(name))); }
    /** Deletes a named snapshot (txvfs_snapshot_delete). */
    void delete_snapshot(std::string_view name) const { detail::check(txvfs_snapshot_delete(s_, detail::cstr(name))); }
    /** Makes `upper` (new, empty) a writable clone of the read-only store `lower` (a named
     *  snapshot's URI) and opens it (txvfs_clone_create). */
    static store clone(std::string_view lower, std::string_view upper) {
        detail::check(txvfs_clone_create(detail::cstr(lower), detail::cstr(upper)));
        return open(upper);
    }
    /** Turns the store's change feed on or off (txvfs_set_change_feed); see txvfs::watcher. */
    void set_change_feed(bool on) const { detail::check(txvfs_set_change_feed(s_, on ? 1 : 0)); }
    txvfs_store *get() const noexcept { return s_; }

private:
    explicit store(txvfs_store *s) noexcept : filesystem(s, nullptr) {}
    static store open_with(std::string_view uri, const txvfs_options *o) {
        txvfs_store *s = nullptr;
        detail::check(txvfs_store_open(detail::cstr(uri), o, &s));
        return store(s);
    }
};

/** One change of the change feed, copied out of the watcher (see txvfs_change). */
struct change {
    /** One TXVFS_CHANGE_* value. */
    std::uint32_t kind;
    /** TXVFS_DT_REG, TXVFS_DT_DIR, TXVFS_DT_LNK, ... */
    std::uint8_t type;
    std::uint64_t ino;
    /** Commit time, ms since the Unix epoch. */
    std::uint64_t time_ms;
    /** The path (a rename's old one); empty for a file changed through its inode alone. */
    std::string path;
    /** A rename's new path. */
    std::optional<std::string> to;
    /** The last change of its transaction: cursor() now stands after that transaction. */
    bool last_in_transaction;
};

/**
 * A consumer of a store's change feed (owns txvfs_watcher; move-only; one thread at a time).
 * Every transaction committed after the start is handed out once, in commit order, one change
 * at a time; save cursor() and pass it as `since` to resume with nothing lost or repeated.
 *
 *   txvfs::watcher w(s, "/docs");                       // after the newest commit
 *   while (auto c = w.wait(std::chrono::seconds(1))) handle(*c);
 */
class watcher {
public:
    /** Watches `s` (its change feed on): changes at or below `prefix` ("" for all), of the
     *  TXVFS_CHANGE_* bits in `kinds` (0 for all), after the cursor `since` (none: now). */
    explicit watcher(const store &s, std::string_view prefix = {}, std::uint32_t kinds = 0,
                     std::optional<std::string_view> since = std::nullopt) {
        std::optional<detail::cstr> c;
        if (since) c.emplace(*since);
        detail::check(txvfs_watch_open(s.get(), detail::cstr(prefix), kinds, c ? static_cast<const char *>(*c) : nullptr, &w_));
    }
    watcher(const watcher &) = delete;
    watcher &operator=(const watcher &) = delete;
    watcher(watcher &&other) noexcept : w_(std::exchange(other.w_, nullptr)) {}
    watcher &operator=(watcher &&other) noexcept {
        std::swap(w_, other.w_);
        return *this;
    }
    ~watcher() { txvfs_watch_free(w_); }

    /** The next change, or none yet (txvfs_watch_poll). */
    std::optional<change> poll() {
        txvfs_change c;
        int has = 0;
        detail::check(txvfs_watch_poll(w_, &c, &has));
        return has ? std::optional<change>(copy(c)) : std::nullopt;
    }
    /** The next change, waiting up to `timeout` for one (txvfs_watch_wait). */
    std::optional<change> wait(std::chrono::milliseconds timeout) {
        txvfs_change c;
        int has = 0;
        auto ms = timeout.count() < 0 ? 0 : timeout.count() > 0xFFFFFFFF ? 0xFFFFFFFF : timeout.count();
        detail::check(txvfs_watch_wait(w_, static_cast<std::uint32_t>(ms), &c, &has));
        return has ? std::optional<change>(copy(c)) : std::nullopt;
    }
    /** Where the watcher stands, as a cursor string (txvfs_watch_cursor). */
    std::string cursor() const {
        char buf[TXVFS_CURSOR_MAX];
        std::size_t n = 0;
        detail::check(txvfs_watch_cursor(w_, buf, sizeof buf, &n));
        return std::string(buf, n);
    }
    txvfs_watcher *get() const noexcept { return w_; }

private:
    static change copy(const txvfs_change &c) {
        change out{c.kind, c.type, c.ino, c.time_ms, std::string(c.path, c.path_len), std::nullopt, c.last_in_transaction != 0};
        if (c.to) out.to = std::string(c.to, c.to_len);
        return out;
    }
    txvfs_watcher *w_ = nullptr;
};

/**
 * An explicit transaction (owns txvfs_tx; move-only). Destroyed uncommitted, it rolls back. It
 * keeps its store open, and may outlive the txvfs::store it was begun on.
 */
class transaction : public filesystem {
public:
    transaction(const transaction &) = delete;
    transaction &operator=(const transaction &) = delete;
    transaction(transaction &&other) noexcept
        : filesystem(other.s_, std::exchange(other.t_, nullptr)), owned_(other.owned_) {}
    transaction &operator=(transaction &&other) noexcept {
        std::swap(s_, other.s_);
        std::swap(t_, other.t_);
        std::swap(owned_, other.owned_);
        return *this;
    }
    ~transaction() {
        if (owned_) txvfs_tx_free(t_);
    }

    /** Commits all changes at once; throws (e.g. a retryable conflict) if it cannot. */
    void commit() { detail::check(txvfs_tx_commit(t_)); }
    void rollback() { detail::check(txvfs_tx_rollback(t_)); }
    txvfs_tx *get() const noexcept { return t_; }

    /** A non-owning view of a transaction owned elsewhere (the argument of txvfs_transact's callback). */
    static transaction borrow(txvfs_store *s, txvfs_tx *t) noexcept { return transaction(s, t, false); }
    /**
     * Joins the file transaction of a SQLite write transaction (token: PRAGMA txvfs_files, see
     * txvfs_tx_join and txvfs_sqlite.hpp): its calls commit with the rows. It cannot commit or
     * roll back itself; destroying it ends nothing.
     */
    static transaction join(const store &s, std::string_view token) {
        txvfs_tx *t = nullptr;
        detail::check(txvfs_tx_join(s.get(), detail::cstr(token), &t));
        return transaction(s.get(), t, true);
    }

private:
    friend class store;
    transaction(txvfs_store *s, txvfs_tx *t, bool owned) noexcept : filesystem(s, t), owned_(owned) {}
    bool owned_;
};

inline transaction store::begin() const {
    txvfs_tx *t = nullptr;
    detail::check(txvfs_tx_begin(s_, &t));
    return transaction(s_, t, true);
}

/**
 * An open file descriptor (move-only); closed when destroyed. It keeps its store open, and may
 * outlive the txvfs::store (or transaction) it was opened on.
 */
class file {
public:
    file(txvfs_store *s, int fd) noexcept : s_(s), fd_(fd) {}
    file(const file &) = delete;
    file &operator=(const file &) = delete;
    file(file &&other) noexcept : s_(other.s_), fd_(std::exchange(other.fd_, -1)) {}
    file &operator=(file &&other) noexcept {
        std::swap(s_, other.s_);
        std::swap(fd_, other.fd_);
        return *this;
    }
    ~file() {
        if (fd_ >= 0) txvfs_close(s_, fd_);
    }

    /** Closes now, reporting errors (a write-back flush); the destructor ignores them. */
    void close() { detail::check(txvfs_close(s_, std::exchange(fd_, -1))); }
    std::size_t read(mutable_bytes buf) const { return io(txvfs_read, buf.data(), buf.size()); }
    std::size_t pread(mutable_bytes buf, std::uint64_t offset) const {
        std::size_t n;
        detail::check(txvfs_pread(s_, fd_, buf.data(), buf.size(), offset, &n));
        return n;
    }
    std::size_t write(bytes_view data) const { return io(txvfs_write, data.data(), data.size()); }
    std::size_t pwrite(bytes_view data, std::uint64_t offset) const {
        std::size_t n;
        detail::check(txvfs_pwrite(s_, fd_, data.data(), data.size(), offset, &n));
        return n;
    }
    /** Reads from the position to the end of the file. */
    std::string read_all() const {
        std::string out;
        char buf[65536];
        for (std::size_t n; (n = read(mutable_bytes(buf, sizeof buf))) > 0;) out.append(buf, n);
        return out;
    }
    /** whence: TXVFS_SEEK_SET, TXVFS_SEEK_CUR or TXVFS_SEEK_END. */
    std::uint64_t seek(std::int64_t offset, int whence = TXVFS_SEEK_SET) const {
        std::uint64_t pos;
        detail::check(txvfs_lseek(s_, fd_, offset, whence, &pos));
        return pos;
    }
    void truncate(std::uint64_t size) const { detail::check(txvfs_ftruncate(s_, fd_, size)); }
    void allocate(int mode, std::uint64_t offset, std::uint64_t len) const {
        detail::check(txvfs_fallocate(s_, fd_, mode, offset, len));
    }
    /** The file's own block size (see txvfs_set_block_size): while it has no blocks. */
    void set_block_size(std::uint32_t bytes) const { detail::check(txvfs_set_block_size(s_, fd_, bytes)); }
    void sync() const { detail::check(txvfs_fsync(s_, fd_)); }
    txvfs_attr stat() const {
        txvfs_attr a;
        detail::check(txvfs_fstat(s_, fd_, &a));
        return a;
    }
    /** operation: TXVFS_LOCK_SH, TXVFS_LOCK_EX or TXVFS_LOCK_UN, optionally | TXVFS_LOCK_NB. */
    void flock(int operation) const { detail::check(txvfs_flock(s_, fd_, operation)); }
    /** type: TXVFS_F_RDLCK, TXVFS_F_WRLCK or TXVFS_F_UNLCK; len 0 means to the end and beyond. */
    void setlk(int type, std::uint64_t start, std::uint64_t len, bool wait = false) const {
        detail::check(txvfs_setlk(s_, fd_, type, start, len, wait));
    }
    /** The lock of another descriptor that would block this one, if any. */
    std::optional<txvfs_lock> getlk(bool write, std::uint64_t start, std::uint64_t len) const {
        txvfs_lock l;
        detail::check(txvfs_getlk(s_, fd_, write, start, len, &l));
        if (l.type == TXVFS_F_UNLCK) return std::nullopt;
        return l;
    }
    int fd() const noexcept { return fd_; }

private:
    template <class F, class P>
    std::size_t io(F f, P data, std::size_t size) const {
        std::size_t n;
        detail::check(f(s_, fd_, data, size, &n));
        return n;
    }
    txvfs_store *s_;
    int fd_;
};

inline file filesystem::open(std::string_view path, int flags, std::uint32_t mode) const {
    int fd = -1;
    detail::check(txvfs_open(s_, t_, detail::cstr(path), flags, mode, &fd));
    return file(s_, fd);
}

/**
 * Runs f(transaction&) in a transaction and commits it, running it again when it conflicts
 * (so f may run several times and must have no effects outside the transaction). Returns f's
 * result; an exception from f rolls back and propagates (a retryable txvfs::error is retried).
 */
template <class F>
auto transact(const store &s, F &&f) -> decltype(f(std::declval<transaction &>())) {
    using R = decltype(f(std::declval<transaction &>()));
    struct state {
        F &f;
        txvfs_store *s;
        std::exception_ptr ex;
        std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> result{};
    } st{f, s.get(), nullptr};
    auto trampoline = [](txvfs_tx *tx, void *userdata) noexcept -> int {
        auto &st = *static_cast<state *>(userdata);
        transaction t = transaction::borrow(st.s, tx);
        st.ex = nullptr;
        try {
            if constexpr (std::is_void_v<R>) {
                st.f(t);
            } else {
                st.result = st.f(t);
            }
            return 0;
        } catch (const error &e) {
            if (!e.retryable()) st.ex = std::current_exception();
            return e.code() < 0 ? e.code() : -EINVAL;
        } catch (...) {
            st.ex = std::current_exception();
            return -ECANCELED;
        }
    };
    int rc = txvfs_transact(s.get(), trampoline, &st);
    if (rc < 0) {
        if (st.ex) std::rethrow_exception(st.ex);
        detail::check(rc);
    }
    if constexpr (!std::is_void_v<R>) return std::move(*st.result);
}

} // namespace txvfs

#endif /* TXVFS_HPP */
