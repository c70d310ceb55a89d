// Bad input never crashes: NULL pointers, bad paths and names, stale, forged and foreign
// descriptors, finished and foreign transactions. Out-parameters stay untouched on failure.
#include "support.hpp"

#include <climits>
#include <string>
#include <sys/stat.h>

TEST_CASE("bad input: NULL pointers give -EINVAL and leave out-parameters alone", "[bad]") {
    Store s;
    put(s, "/f", "x");
    txvfs_attr a{};
    a.size = 777;
    size_t n = 777;
    int fd = 777;
    bool e = true;
    uint32_t u32 = 777;
    uint64_t u64 = 777;
    char buf[8];
    txvfs_dirent d[2];
    txvfs_usage us{};
    txvfs_lock lk{};
    txvfs_store *st = nullptr;
    txvfs_tx *tx = nullptr;
    txvfs_options *o = nullptr;

    REQUIRE(txvfs_store_open(nullptr, nullptr, &st) == -EINVAL);
    REQUIRE(txvfs_store_open("memory:", nullptr, nullptr) == -EINVAL);
    REQUIRE(std::string(txvfs_last_error()).find("`out`") != std::string::npos);
    REQUIRE(txvfs_store_sync(nullptr) == -EINVAL);
    REQUIRE(txvfs_store_block_size(nullptr, &u32) == -EINVAL);
    REQUIRE(txvfs_store_block_size(s, nullptr) == -EINVAL);
    REQUIRE(txvfs_store_inline_limit(nullptr, &u32) == -EINVAL);
    REQUIRE(u32 == 777);
    REQUIRE(txvfs_options_new(nullptr) == -EINVAL);
    REQUIRE(txvfs_options_set_sync(nullptr, true) == -EINVAL);
    REQUIRE(txvfs_options_set_block_size(nullptr, 4096) == -EINVAL);
    REQUIRE(txvfs_options_set_inline_limit(nullptr, 1) == -EINVAL);
    REQUIRE(txvfs_options_set_read_only(nullptr, true) == -EINVAL);
    REQUIRE(txvfs_options_set_credential(nullptr, 1, 1, nullptr, 0) == -EINVAL);
    REQUIRE(txvfs_options_set_max_retries(nullptr, 1) == -EINVAL);
    REQUIRE(txvfs_tx_begin(nullptr, &tx) == -EINVAL);
    REQUIRE(txvfs_tx_begin(s, nullptr) == -EINVAL);
    REQUIRE(txvfs_tx_commit(nullptr) == -EINVAL);
    REQUIRE(txvfs_tx_rollback(nullptr) == -EINVAL);
    REQUIRE(txvfs_transact(nullptr, nullptr, nullptr) == -EINVAL);
    REQUIRE(txvfs_transact(s, nullptr, nullptr) == -EINVAL);
    REQUIRE(st == nullptr);
    REQUIRE(tx == nullptr);
    REQUIRE(o == nullptr);

    // Path operations: NULL store, NULL path, NULL out.
    REQUIRE(txvfs_stat(nullptr, nullptr, "/f", &a) == -EINVAL);
    REQUIRE(txvfs_stat(s, nullptr, nullptr, &a) == -EINVAL);
    REQUIRE(txvfs_stat(s, nullptr, "/f", nullptr) == -EINVAL);
    REQUIRE(txvfs_lstat(s, nullptr, nullptr, &a) == -EINVAL);
    REQUIRE(a.size == 777);
    REQUIRE(txvfs_exists(s, nullptr, "/f", nullptr) == -EINVAL);
    REQUIRE(txvfs_exists(s, nullptr, nullptr, &e) == -EINVAL);
    REQUIRE(txvfs_mkdir(s, nullptr, nullptr, 0755) == -EINVAL);
    REQUIRE(txvfs_mkdir_all(nullptr, nullptr, "/x", 0755) == -EINVAL);
    REQUIRE(txvfs_rmdir(s, nullptr, nullptr) == -EINVAL);
    REQUIRE(txvfs_unlink(s, nullptr, nullptr) == -EINVAL);
    REQUIRE(txvfs_rename(s, nullptr, nullptr, "/g", 0) == -EINVAL);
    REQUIRE(txvfs_rename(s, nullptr, "/f", nullptr, 0) == -EINVAL);
    REQUIRE(txvfs_link(s, nullptr, "/f", nullptr) == -EINVAL);
    REQUIRE(txvfs_symlink(s, nullptr, nullptr, "/l") == -EINVAL);
    REQUIRE(txvfs_readlink(s, nullptr, "/f", nullptr, 0, nullptr) == -EINVAL);
    REQUIRE(txvfs_chmod(s, nullptr, nullptr, 0) == -EINVAL);
    REQUIRE(txvfs_chown(s, nullptr, nullptr, 0, 0) == -EINVAL);
    REQUIRE(txvfs_utimens(s, nullptr, nullptr, 0, 0) == -EINVAL);
    REQUIRE(txvfs_truncate(s, nullptr, nullptr, 0) == -EINVAL);
    REQUIRE(txvfs_readdir(s, nullptr, "/", nullptr, nullptr, 2, &n) == -EINVAL);
    REQUIRE(txvfs_readdir(s, nullptr, "/", nullptr, d, 2, nullptr) == -EINVAL);
    REQUIRE(txvfs_read_file(s, nullptr, "/f", nullptr, 4, &n) == -EINVAL); // NULL buf, cap 4
    REQUIRE(txvfs_write_file(s, nullptr, "/f", nullptr, 4) == -EINVAL);
    REQUIRE(txvfs_getxattr(s, nullptr, "/f", nullptr, buf, 8, &n) == -EINVAL);
    REQUIRE(txvfs_setxattr(s, nullptr, "/f", "user.a", nullptr, 3, 0) == -EINVAL);
    REQUIRE(txvfs_listxattr(s, nullptr, "/f", buf, 8, nullptr) == -EINVAL);
    REQUIRE(txvfs_removexattr(s, nullptr, "/f", nullptr) == -EINVAL);
    REQUIRE(txvfs_statfs(s, nullptr, nullptr) == -EINVAL);
    REQUIRE(txvfs_statfs(nullptr, nullptr, &us) == -EINVAL);
    REQUIRE(n == 777);
    REQUIRE(get(s, "/f") == "x"); // the failed write_file changed nothing

    // Descriptor calls.
    REQUIRE(txvfs_open(s, nullptr, "/f", O_RDONLY, 0, nullptr) == -EINVAL);
    REQUIRE(txvfs_open(s, nullptr, nullptr, O_RDONLY, 0, &fd) == -EINVAL);
    REQUIRE(txvfs_open(nullptr, nullptr, "/f", O_RDONLY, 0, &fd) == -EINVAL);
    REQUIRE(fd == 777);
    fd = open_fd(s, "/f", O_RDWR);
    REQUIRE(txvfs_read(s, fd, nullptr, 4, &n) == -EINVAL);
    REQUIRE(txvfs_read(s, fd, buf, 4, nullptr) == -EINVAL);
    REQUIRE(txvfs_pread(s, fd, nullptr, 4, 0, &n) == -EINVAL);
    REQUIRE(txvfs_write(s, fd, nullptr, 4, &n) == -EINVAL);
    REQUIRE(txvfs_pwrite(s, fd, "abc", 3, 0, nullptr) == -EINVAL);
    REQUIRE(txvfs_lseek(s, fd, 0, TXVFS_SEEK_SET, nullptr) == -EINVAL);
    REQUIRE(txvfs_fstat(s, fd, nullptr) == -EINVAL);
    REQUIRE(txvfs_getlk(s, fd, true, 0, 0, nullptr) == -EINVAL);
    REQUIRE(txvfs_close(nullptr, fd) == -EINVAL);
    REQUIRE(txvfs_read(nullptr, fd, buf, 4, &n) == -EINVAL);
    REQUIRE(n == 777);
    OK(txvfs_read(s, fd, nullptr, 0, &n)); // an empty buffer may be NULL
    REQUIRE(n == 0);
    OK(txvfs_close(s, fd));
    REQUIRE(get(s, "/f") == "x");

    // Every free function accepts NULL.
    txvfs_store_free(nullptr);
    txvfs_tx_free(nullptr);
    txvfs_options_free(nullptr);
    (void)u64;
    (void)lk;
}

TEST_CASE("bad input: empty, relative, over-long paths and names", "[bad]") {
    Store s;
    txvfs_attr a;
    REQUIRE(txvfs_stat(s, nullptr, "", &a) == -ENOENT);
    REQUIRE(txvfs_mkdir(s, nullptr, "", 0755) == -ENOENT);
    REQUIRE(txvfs_mkdir(s, nullptr, "relative", 0755) == -EINVAL);
    std::string long_name = "/" + std::string(256, 'a');
    REQUIRE(txvfs_mkdir(s, nullptr, long_name.c_str(), 0755) == -ENAMETOOLONG);
    REQUIRE(txvfs_write_file(s, nullptr, long_name.c_str(), "x", 1) == -ENAMETOOLONG);
    std::string ok_name = "/" + std::string(255, 'a');
    OK(txvfs_mkdir(s, nullptr, ok_name.c_str(), 0755));
    std::string long_path;
    while (long_path.size() <= 4096) long_path += "/abcdefgh";
    REQUIRE(txvfs_stat(s, nullptr, long_path.c_str(), &a) == -ENAMETOOLONG);
    int fd = 5;
    REQUIRE(txvfs_open(s, nullptr, long_path.c_str(), O_RDWR | O_CREAT, 0644, &fd) == -ENAMETOOLONG);
    REQUIRE(fd == 5);
    REQUIRE(txvfs_rename(s, nullptr, ok_name.c_str(), long_name.c_str(), 0) == -ENAMETOOLONG);
    REQUIRE(txvfs_symlink(s, nullptr, "/x", long_path.c_str()) == -ENAMETOOLONG);
    // ".." never leaves the root.
    OK(txvfs_stat(s, nullptr, "/../../..", &a));
    REQUIRE(S_ISDIR(a.mode));
}

TEST_CASE("bad input: a single name with '/' (the readdir cursor) is EINVAL", "[bad]") {
    Store s;
    OK(txvfs_mkdir(s, nullptr, "/d", 0755));
    txvfs_dirent d[4];
    size_t n = 777;
    REQUIRE(txvfs_readdir(s, nullptr, "/d", "a/b", d, 4, &n) == -EINVAL);
    REQUIRE(std::string(txvfs_last_error()).find("'/'") != std::string::npos);
    REQUIRE(txvfs_readdir(s, nullptr, "/d", "", d, 4, &n) == -EINVAL);
    REQUIRE(txvfs_readdir(s, nullptr, "/d", "..", d, 4, &n) == -EINVAL);
    REQUIRE(txvfs_readdir(s, nullptr, "/d", std::string(256, 'x').c_str(), d, 4, &n) < 0);
    REQUIRE(n == 777);
}

TEST_CASE("bad input: stale, double-closed, forged and foreign descriptors are -EBADF", "[bad]") {
    Store s, other;
    put(s, "/f", "x");
    put(other, "/f", "y");
    int fd = open_fd(s, "/f", O_RDWR);
    OK(txvfs_close(s, fd));
    char buf[4];
    size_t n = 777;
    uint64_t pos = 777;
    txvfs_attr a;
    txvfs_lock l;
    // Stale (closed) descriptor: every descriptor call.
    REQUIRE(txvfs_read(s, fd, buf, 4, &n) == -EBADF);
    REQUIRE(txvfs_pread(s, fd, buf, 4, 0, &n) == -EBADF);
    REQUIRE(txvfs_write(s, fd, "a", 1, &n) == -EBADF);
    REQUIRE(txvfs_pwrite(s, fd, "a", 1, 0, &n) == -EBADF);
    REQUIRE(txvfs_lseek(s, fd, 0, TXVFS_SEEK_SET, &pos) == -EBADF);
    REQUIRE(txvfs_ftruncate(s, fd, 0) == -EBADF);
    REQUIRE(txvfs_fallocate(s, fd, 0, 0, 1) == -EBADF);
    REQUIRE(txvfs_fsync(s, fd) == -EBADF);
    REQUIRE(txvfs_fstat(s, fd, &a) == -EBADF);
    REQUIRE(txvfs_flock(s, fd, TXVFS_LOCK_EX) == -EBADF);
    REQUIRE(txvfs_setlk(s, fd, TXVFS_F_WRLCK, 0, 1, false) == -EBADF);
    REQUIRE(txvfs_getlk(s, fd, true, 0, 1, &l) == -EBADF);
    REQUIRE(txvfs_close(s, fd) == -EBADF); // double close
    REQUIRE(n == 777);
    REQUIRE(pos == 777);
    REQUIRE(get(s, "/f") == "x");

    // A new open may reuse the slot but not the number.
    int fd2 = open_fd(s, "/f", O_RDWR);
    REQUIRE(fd2 != fd);
    REQUIRE(txvfs_read(s, fd, buf, 4, &n) == -EBADF);

    // Forged numbers: never handed out.
    for (int forged : {0, 1, 2, 3, -1, INT_MIN, INT_MAX, fd2 + 1, fd2 ^ (1 << 16), fd2 & 0xffff})
        REQUIRE(txvfs_fstat(s, forged, &a) == -EBADF);

    // Another store's descriptor (both stores have slot 0 in use).
    int ofd = open_fd(other, "/f", O_RDWR);
    REQUIRE(txvfs_fstat(s, ofd, &a) == -EBADF);
    REQUIRE(txvfs_write(s, ofd, "z", 1, &n) == -EBADF);
    REQUIRE(txvfs_close(s, ofd) == -EBADF);
    REQUIRE(txvfs_fstat(other, fd2, &a) == -EBADF);
    OK(txvfs_close(other, ofd));
    OK(txvfs_close(s, fd2));
    REQUIRE(get(other, "/f") == "y");
}

TEST_CASE("bad input: finished and foreign transactions", "[bad][tx]") {
    Store s, other;
    txvfs_tx *tx = nullptr;
    OK(txvfs_tx_begin(s, &tx));
    put(s, "/in-tx", "1", tx);
    int fd = open_fd(s, "/in-tx", O_RDWR, tx);
    // A transaction of another store.
    txvfs_attr a;
    REQUIRE(txvfs_stat(other, tx, "/in-tx", &a) == -EXDEV);
    REQUIRE(txvfs_mkdir(other, tx, "/d", 0755) == -EXDEV);
    OK(txvfs_tx_commit(tx));
    // Use after commit: calls fail, descriptors are EBADF, commit/rollback again EINVAL.
    REQUIRE(txvfs_stat(s, tx, "/in-tx", &a) == -EINVAL);
    REQUIRE(txvfs_write_file(s, tx, "/late", "x", 1) == -EINVAL);
    REQUIRE(std::string(txvfs_last_error()).find("already committed") != std::string::npos);
    REQUIRE(txvfs_open(s, tx, "/in-tx", O_RDONLY, 0, &fd) == -EINVAL);
    size_t n;
    REQUIRE(txvfs_write(s, fd, "x", 1, &n) == -EBADF);
    REQUIRE(txvfs_tx_commit(tx) == -EINVAL);
    REQUIRE(txvfs_tx_rollback(tx) == -EINVAL);
    OK(txvfs_close(s, fd));
    txvfs_tx_free(tx);
    REQUIRE(get(s, "/in-tx") == "1");
    bool e = true;
    OK(txvfs_exists(s, nullptr, "/late", &e));
    REQUIRE_FALSE(e);
}

TEST_CASE("bad input: tokens to join (txvfs_tx_join, txvfs_tx_joined_commit_error)", "[bad][tx]") {
    Store s;
    txvfs_tx *tx = nullptr;
    REQUIRE(txvfs_tx_join(nullptr, "txvfs-tx-1-1", &tx) == -EINVAL);
    REQUIRE(txvfs_tx_join(s, nullptr, &tx) == -EINVAL);
    REQUIRE(std::string(txvfs_last_error()).find("`token`") != std::string::npos);
    REQUIRE(txvfs_tx_join(s, "txvfs-tx-1-1", nullptr) == -EINVAL);
    REQUIRE(txvfs_tx_join(s, "txvfs-tx-\xff\xfe", &tx) == -EINVAL);
    REQUIRE(std::string(txvfs_last_error()).find("UTF-8") != std::string::npos);
    // Well-formed and garbage tokens nobody published: -ENOENT, with the reason.
    for (std::string t : {std::string("txvfs-tx-1-1"), std::string(), std::string(10000, 'x'),
                          std::string("txvfs-tx-") + std::to_string(getpid()) + "-1"}) {
        REQUIRE(txvfs_tx_join(s, t.c_str(), &tx) == -ENOENT);
        REQUIRE(std::string(txvfs_last_error()).find("no live transaction") != std::string::npos);
        REQUIRE(txvfs_tx_joined_commit_error(t.c_str()) == 0); // no failure known
    }
    REQUIRE(tx == nullptr);
    REQUIRE(txvfs_tx_joined_commit_error(nullptr) == -EINVAL);
    REQUIRE(txvfs_tx_joined_commit_error("\xff") == -EINVAL);
}
