// Object lifetimes across the C ABI (issue 20, items 10 and 11): descriptors and transactions
// that outlive txvfs_store_free (and the C++ store that owns the handle), and descriptor
// numbers that stay dead after any realistic number of opens. Built twice: into txvfs_tests
// (run under valgrind by tests/cpp/run) and into txvfs_lifetimes_asan (AddressSanitizer).
#include "support.hpp"

#include <txvfs.hpp>

#include <string>

TEST_CASE("lifetimes: descriptors and transactions keep their store alive after txvfs_store_free", "[lifetimes]") {
    TempDir dir;
    std::string uri = "rocksdb:" + dir.path + "/db";
    txvfs_store *s = nullptr;
    OK(txvfs_store_open(uri.c_str(), nullptr, &s));
    put(s, "/f", "before");
    int fd = open_fd(s, "/f", O_RDWR);
    txvfs_tx *tx = nullptr;
    OK(txvfs_tx_begin(s, &tx));
    put(s, "/in-tx", "from the transaction", tx);
    int txfd = open_fd(s, "/in-tx", O_RDONLY, tx);

    txvfs_store_free(s); // the caller's reference: the descriptors and the transaction remain

    char buf[32];
    size_t n = 0;
    OK(txvfs_read(s, fd, buf, sizeof buf, &n));
    REQUIRE(std::string(buf, n) == "before");
    OK(txvfs_pwrite(s, fd, "after!", 6, 0, &n));
    OK(txvfs_fsync(s, fd));
    txvfs_attr a;
    OK(txvfs_fstat(s, fd, &a));
    REQUIRE(a.size == 6);
    OK(txvfs_read(s, txfd, buf, sizeof buf, &n));
    REQUIRE(std::string(buf, n) == "from the transaction");
    REQUIRE(get(s, "/in-tx", tx) == "from the transaction");
    OK(txvfs_close(s, fd));
    // The transaction still holds the store: path calls with it and its commit work.
    put(s, "/second", "2", tx);
    OK(txvfs_tx_commit(tx));
    REQUIRE(txvfs_read(s, txfd, buf, sizeof buf, &n) == -EBADF); // its transaction ended
    OK(txvfs_close(s, txfd));
    txvfs_tx_free(tx); // the last reference: the store is closed and freed here

    Store again(uri);
    REQUIRE(get(again, "/f") == "after!");
    REQUIRE(get(again, "/in-tx") == "from the transaction");
    REQUIRE(get(again, "/second") == "2");
}

TEST_CASE("lifetimes: the store is freed with its last descriptor when the handle went first", "[lifetimes]") {
    txvfs_store *s = nullptr;
    OK(txvfs_store_open("memory:", nullptr, &s));
    int a = open_fd(s, "/a", O_RDWR | O_CREAT), b = open_fd(s, "/b", O_RDWR | O_CREAT);
    txvfs_store_free(s);
    size_t n = 0;
    OK(txvfs_write(s, b, "b", 1, &n));
    OK(txvfs_close(s, b));
    REQUIRE(txvfs_close(s, b) == -EBADF); // a is still open: the handle is alive
    OK(txvfs_write(s, a, "a", 1, &n));
    OK(txvfs_close(s, a)); // freed here (valgrind and LeakSanitizer check that nothing leaks)
}

namespace {

/** Opens a store of its own and returns a file of it: the store object dies on return. */
txvfs::file file_of_a_store_that_is_gone(const std::string &uri) {
    txvfs::store s = txvfs::store::open(uri);
    s.write_file("/f", "written through the store");
    return s.open("/f", O_RDWR);
}

/** The same for a transaction. */
txvfs::transaction transaction_of_a_store_that_is_gone(const std::string &uri) {
    txvfs::store s = txvfs::store::open(uri);
    s.write_file("/t", "old");
    txvfs::transaction tx = s.begin();
    tx.write_file("/t", "new");
    return tx;
}

} // namespace

TEST_CASE("lifetimes: C++ files and transactions outlive their txvfs::store", "[lifetimes][cpp]") {
    TempDir dir;
    std::string uri = "rocksdb:" + dir.path + "/db";
    {
        txvfs::file f = file_of_a_store_that_is_gone(uri);
        REQUIRE(f.read_all() == "written through the store");
        f.pwrite("WRITTEN", 0);
        REQUIRE(f.stat().size == 25);
        f.close();
    }
    {
        txvfs::transaction tx = transaction_of_a_store_that_is_gone(uri);
        REQUIRE(tx.read_file("/t") == "new");
        txvfs::file g = tx.open("/g", O_WRONLY | O_CREAT);
        g.write("in the transaction");
        tx.commit();
        REQUIRE_THROWS_AS(g.write("late"), txvfs::error); // the transaction has ended: EBADF
    } // g closed, then the transaction freed: the store with it
    txvfs::store s = txvfs::store::open(uri);
    REQUIRE(s.read_file("/f") == "WRITTEN through the store");
    REQUIRE(s.read_file("/t") == "new");
    REQUIRE(s.read_file("/g") == "in the transaction");
}

TEST_CASE("lifetimes: a closed descriptor stays -EBADF through 40000 open/close cycles", "[lifetimes][bad]") {
    // The old numbering (15-bit generations from one counter) handed a closed descriptor's
    // number out again after 32767 opens; a write through it then changed another file.
    Store s;
    put(s, "/victim", "unchanged");
    put(s, "/old", "old");
    int stale = open_fd(s, "/old", O_RDWR);
    OK(txvfs_close(s, stale));
    size_t n = 0;
    long reused = -1;
    for (long i = 0; i < 40000 && reused < 0; i++) {
        int fd = -1;
        int rc = txvfs_open(s, nullptr, "/victim", O_RDWR, 0, &fd);
        if (rc != 0) FAIL("open " << i << ": " << txvfs_last_error());
        if (fd == stale || txvfs_write(s, stale, "X", 1, &n) != -EBADF) reused = i;
        if (txvfs_close(s, fd) != 0) FAIL("close " << i << ": " << txvfs_last_error());
    }
    INFO("the closed descriptor " << stale << " named a file again after " << reused << " opens");
    REQUIRE(reused == -1);
    REQUIRE(get(s, "/victim") == "unchanged");
    REQUIRE(txvfs_close(s, stale) == -EBADF);
}
