// Descriptors: every fd call, write-back, locks between descriptors, unlinked open files.
#include "support.hpp"

#include <atomic>
#include <chrono>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

static size_t rd(txvfs_store *s, int fd, std::string &buf) {
    size_t n = 0;
    OK(txvfs_read(s, fd, buf.data(), buf.size(), &n));
    return n;
}

TEST_CASE("files: open flags, read, write, pread, pwrite, lseek, fstat, close", "[files]") {
    Store s;
    int fd = open_fd(s, "/f", O_RDWR | O_CREAT | O_EXCL);
    size_t n = 0;
    OK(txvfs_write(s, fd, "hello", 5, &n));
    REQUIRE(n == 5);
    OK(txvfs_pwrite(s, fd, "HE", 2, 0, &n));
    REQUIRE(n == 2);
    uint64_t pos = 99;
    OK(txvfs_lseek(s, fd, 0, TXVFS_SEEK_CUR, &pos));
    REQUIRE(pos == 5); // pwrite does not move the position
    OK(txvfs_lseek(s, fd, 1, TXVFS_SEEK_SET, &pos));
    REQUIRE(pos == 1);
    std::string buf(16, '\0');
    REQUIRE(rd(s, fd, buf) == 4);
    REQUIRE(buf.substr(0, 4) == "Ello");
    REQUIRE(rd(s, fd, buf) == 0); // end of file
    OK(txvfs_pread(s, fd, buf.data(), 3, 2, &n));
    REQUIRE(buf.substr(0, n) == "llo");
    OK(txvfs_pread(s, fd, buf.data(), 3, 100, &n));
    REQUIRE(n == 0);
    OK(txvfs_lseek(s, fd, -2, TXVFS_SEEK_END, &pos));
    REQUIRE(pos == 3);
    REQUIRE(txvfs_lseek(s, fd, -10, TXVFS_SEEK_CUR, &pos) == -EINVAL);
    REQUIRE(txvfs_lseek(s, fd, -1, TXVFS_SEEK_SET, &pos) == -EINVAL);
    REQUIRE(txvfs_lseek(s, fd, 0, 3, &pos) == -EINVAL);
    REQUIRE(pos == 3);
    OK(txvfs_lseek(s, fd, 10, TXVFS_SEEK_SET, &pos)); // past the end
    OK(txvfs_write(s, fd, "!", 1, &n));
    txvfs_attr a;
    OK(txvfs_fstat(s, fd, &a));
    REQUIRE(a.size == 11);
    REQUIRE(S_ISREG(a.mode));
    REQUIRE((a.mode & 0777) == 0644);
    OK(txvfs_fsync(s, fd));
    OK(txvfs_close(s, fd));
    REQUIRE(get(s, "/f") == std::string("HEllo\0\0\0\0\0!", 11));

    REQUIRE(txvfs_open(s, nullptr, "/f", O_RDWR | O_CREAT | O_EXCL, 0644, &fd) == -EEXIST);
    REQUIRE(txvfs_open(s, nullptr, "/nope", O_RDONLY, 0, &fd) == -ENOENT);
    REQUIRE(txvfs_open(s, nullptr, "/f", O_RDWR | O_WRONLY | O_RDONLY | 3, 0, &fd) == -EINVAL);
    fd = open_fd(s, "/f", O_WRONLY | O_TRUNC);
    REQUIRE(txvfs_read(s, fd, buf.data(), buf.size(), &n) == -EBADF); // not open for reading
    OK(txvfs_close(s, fd));
    REQUIRE(get(s, "/f").empty());
    fd = open_fd(s, "/f", O_RDONLY);
    REQUIRE(txvfs_write(s, fd, "x", 1, &n) == -EBADF); // not open for writing
    REQUIRE(txvfs_ftruncate(s, fd, 0) == -EBADF);
    OK(txvfs_close(s, fd));
    fd = open_fd(s, "/", O_RDONLY);
    REQUIRE(txvfs_read(s, fd, buf.data(), buf.size(), &n) == -EISDIR);
    OK(txvfs_fstat(s, fd, &a));
    REQUIRE(S_ISDIR(a.mode));
    OK(txvfs_close(s, fd));
    OK(txvfs_symlink(s, nullptr, "/f", "/ln"));
    REQUIRE(txvfs_open(s, nullptr, "/ln", O_RDONLY | O_NOFOLLOW, 0, &fd) == -ELOOP);
}

TEST_CASE("files: append, ftruncate, fallocate modes", "[files]") {
    Store s;
    put(s, "/f", "abc");
    int fd = open_fd(s, "/f", O_WRONLY | O_APPEND);
    size_t n;
    OK(txvfs_pwrite(s, fd, "Z", 1, 0, &n)); // O_APPEND: to the end, as on Linux
    OK(txvfs_write(s, fd, "d", 1, &n));
    REQUIRE(get(s, "/f") == "abcZd");
    OK(txvfs_ftruncate(s, fd, 2));
    REQUIRE(get(s, "/f") == "ab");
    OK(txvfs_close(s, fd));

    fd = open_fd(s, "/f", O_RDWR);
    txvfs_attr a;
    OK(txvfs_fallocate(s, fd, 0, 0, 100));
    OK(txvfs_fstat(s, fd, &a));
    REQUIRE(a.size == 100);
    OK(txvfs_fallocate(s, fd, TXVFS_FALLOC_KEEP_SIZE, 0, 1000));
    OK(txvfs_fstat(s, fd, &a));
    REQUIRE(a.size == 100);
    OK(txvfs_fallocate(s, fd, TXVFS_FALLOC_PUNCH_HOLE | TXVFS_FALLOC_KEEP_SIZE, 0, 1));
    REQUIRE(get(s, "/f").substr(0, 2) == std::string("\0b", 2));
    REQUIRE(txvfs_fallocate(s, fd, TXVFS_FALLOC_PUNCH_HOLE, 0, 1) == -EINVAL);
    REQUIRE(txvfs_fallocate(s, fd, 64, 0, 1) == -EINVAL);
    OK(txvfs_close(s, fd));
}

TEST_CASE("files: a file's own block size, set while it has no blocks", "[files]") {
    Store s;
    int fd = open_fd(s, "/pages", O_RDWR | O_CREAT);
    REQUIRE(txvfs_set_block_size(s, fd, 3000) == -EINVAL);
    REQUIRE(txvfs_set_block_size(s, fd, 256) == -EINVAL);
    OK(txvfs_set_block_size(s, fd, 4096));
    std::string page(10000, 'p');
    size_t n;
    OK(txvfs_pwrite(s, fd, page.data(), page.size(), 0, &n));
    txvfs_attr a;
    OK(txvfs_fstat(s, fd, &a));
    REQUIRE(a.blksize == 4096);
    REQUIRE(txvfs_set_block_size(s, fd, 1024) == -EBUSY); // it has blocks now
    OK(txvfs_set_block_size(s, fd, 4096));                // the size it has: nothing to do
    REQUIRE(get(s, "/pages") == page);
    OK(txvfs_close(s, fd));
    fd = open_fd(s, "/pages", O_RDONLY);
    REQUIRE(txvfs_set_block_size(s, fd, 4096) == -EBADF); // not open for writing
    OK(txvfs_close(s, fd));
}

TEST_CASE("files: write-back descriptors publish at fsync and close", "[files]") {
    Store s;
    int fd = open_fd(s, "/wb", O_WRONLY | O_CREAT | TXVFS_O_WRITE_BACK);
    size_t n;
    for (int i = 0; i < 100; i++) OK(txvfs_write(s, fd, "0123456789", 10, &n));
    REQUIRE(get(s, "/wb").empty()); // buffered in the descriptor
    OK(txvfs_fsync(s, fd));
    REQUIRE(get(s, "/wb").size() == 1000);
    OK(txvfs_write(s, fd, "tail", 4, &n));
    OK(txvfs_close(s, fd));
    REQUIRE(get(s, "/wb").size() == 1004);
}

TEST_CASE("files: an unlinked file stays readable through its descriptor", "[files]") {
    Store s;
    put(s, "/f", "still here");
    int fd = open_fd(s, "/f", O_RDONLY);
    OK(txvfs_unlink(s, nullptr, "/f"));
    bool e = true;
    OK(txvfs_exists(s, nullptr, "/f", &e));
    REQUIRE_FALSE(e);
    std::string buf(32, '\0');
    REQUIRE(rd(s, fd, buf) == 10);
    REQUIRE(buf.substr(0, 10) == "still here");
    OK(txvfs_close(s, fd));
}

TEST_CASE("files: flock between descriptors, released at close", "[files][locks]") {
    Store s;
    put(s, "/f", "x");
    int a = open_fd(s, "/f", O_RDWR), b = open_fd(s, "/f", O_RDWR);
    OK(txvfs_flock(s, a, TXVFS_LOCK_SH));
    OK(txvfs_flock(s, b, TXVFS_LOCK_SH | TXVFS_LOCK_NB));
    REQUIRE(txvfs_flock(s, a, TXVFS_LOCK_EX | TXVFS_LOCK_NB) == -EAGAIN);
    OK(txvfs_flock(s, b, TXVFS_LOCK_UN));
    OK(txvfs_flock(s, a, TXVFS_LOCK_EX | TXVFS_LOCK_NB));
    REQUIRE(txvfs_flock(s, b, TXVFS_LOCK_SH | TXVFS_LOCK_NB) == -EAGAIN);
    REQUIRE(txvfs_flock(s, b, 3) == -EINVAL);
    // A blocking request waits until the holder closes.
    std::atomic<bool> got{false};
    int waited = 1; // Catch2 assertions are not thread-safe: check after the join
    std::thread waiter([&] {
        waited = txvfs_flock(s, b, TXVFS_LOCK_EX);
        got = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    OK(txvfs_close(s, a));
    waiter.join();
    REQUIRE(got);
    REQUIRE(waited == 0);
    OK(txvfs_close(s, b));
}

TEST_CASE("files: byte-range locks, getlk reports the holder", "[files][locks]") {
    Store s;
    put(s, "/f", "0123456789");
    int a = open_fd(s, "/f", O_RDWR), b = open_fd(s, "/f", O_RDWR), r = open_fd(s, "/f", O_RDONLY);
    OK(txvfs_setlk(s, a, TXVFS_F_WRLCK, 0, 5, false));
    OK(txvfs_setlk(s, b, TXVFS_F_WRLCK, 5, 5, false)); // disjoint
    REQUIRE(txvfs_setlk(s, b, TXVFS_F_RDLCK, 4, 2, false) == -EAGAIN);
    txvfs_lock l;
    OK(txvfs_getlk(s, b, false, 0, 10, &l));
    REQUIRE(l.type == TXVFS_F_WRLCK);
    REQUIRE(l.start == 0);
    REQUIRE(l.len == 5);
    OK(txvfs_getlk(s, a, true, 0, 5, &l)); // its own lock does not block it
    REQUIRE(l.type == TXVFS_F_UNLCK);
    REQUIRE(txvfs_setlk(s, r, TXVFS_F_WRLCK, 20, 1, false) == -EBADF); // write lock, read-only fd
    REQUIRE(txvfs_setlk(s, a, 7, 0, 1, false) == -EINVAL);
    OK(txvfs_setlk(s, a, TXVFS_F_UNLCK, 0, 0, false));
    OK(txvfs_setlk(s, b, TXVFS_F_RDLCK, 0, 5, true));
    for (int fd : {a, b, r}) OK(txvfs_close(s, fd));
}

TEST_CASE("files: many threads share one store and its descriptor table", "[files][threads]") {
    Store s;
    OK(txvfs_mkdir(s, nullptr, "/t", 0755));
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 8; t++) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 50; i++) {
                std::string path = "/t/" + std::to_string(t) + "-" + std::to_string(i);
                int fd = -1;
                size_t n = 0;
                std::string body = path + " body";
                if (txvfs_open(s, nullptr, path.c_str(), O_RDWR | O_CREAT, 0644, &fd) != 0 ||
                    txvfs_write(s, fd, body.data(), body.size(), &n) != 0 ||
                    txvfs_close(s, fd) != 0 || get(s, path.c_str()) != body ||
                    txvfs_close(s, fd) != -EBADF)
                    failures++;
            }
        });
    }
    for (auto &th : threads) th.join();
    REQUIRE(failures == 0);
    txvfs_dirent page[512];
    size_t n = 0;
    OK(txvfs_readdir(s, nullptr, "/t", nullptr, page, 512, &n));
    REQUIRE(n == 400);
}
