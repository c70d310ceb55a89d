// The C++ wrapper txvfs.hpp: RAII owners, exceptions, buffers, transact.
#include "support.hpp"

#include <txvfs.hpp>

#include <array>
#include <atomic>
#include <thread>
#include <vector>

TEST_CASE("wrapper: store, files, buffers and exceptions", "[cpp]") {
    txvfs::store s = txvfs::store::open("memory:");
    s.mkdir("/d");
    s.mkdir_all("/d/e/f");
    s.write_file("/d/a.txt", "alpha");
    std::vector<uint8_t> bytes = {1, 2, 3, 0, 4};
    s.write_file("/d/bin", bytes);
    REQUIRE(s.read_file("/d/bin") == std::string("\1\2\3\0\4", 5));
    REQUIRE(s.read_file("/d/a.txt") == "alpha");
    REQUIRE(s.exists("/d/e/f"));
    REQUIRE_FALSE(s.exists("/nope"));
    REQUIRE(s.stat("/d/a.txt").size == 5);

    try {
        s.stat("/nope");
        FAIL("no exception");
    } catch (const txvfs::error &e) {
        REQUIRE(e.code() == -ENOENT);
        REQUIRE_FALSE(e.retryable());
        REQUIRE(std::string(e.what()).find("/nope") != std::string::npos);
    }
    REQUIRE_THROWS_AS(s.mkdir("/d"), txvfs::error);

    {
        txvfs::file f = s.open("/d/a.txt", O_RDWR | O_APPEND);
        REQUIRE(f.write(std::string_view("-beta")) == 5);
        f.seek(0);
        REQUIRE(f.read_all() == "alpha-beta");
        std::array<char, 4> buf{};
        REQUIRE(f.pread(buf, 6) == 4);
        REQUIRE(std::string(buf.data(), 4) == "beta");
        f.pwrite("X", 0); // append mode: to the end
        REQUIRE(f.stat().size == 11);
        f.truncate(5);
        f.allocate(0, 0, 8);
        f.sync();
        txvfs::file g = std::move(f);
        REQUIRE(f.fd() == -1);
        g.flock(TXVFS_LOCK_EX | TXVFS_LOCK_NB);
        g.setlk(TXVFS_F_WRLCK, 0, 1);
        txvfs::file h = s.open("/d/a.txt", O_RDWR);
        REQUIRE_THROWS_AS(h.flock(TXVFS_LOCK_SH | TXVFS_LOCK_NB), txvfs::error);
        auto l = h.getlk(true, 0, 1);
        REQUIRE(l.has_value());
        REQUIRE(l->type == TXVFS_F_WRLCK);
        REQUIRE_FALSE(h.getlk(true, 5, 1).has_value());
        g.close();
        REQUIRE_THROWS_AS(g.close(), txvfs::error); // closed twice: EBADF
    } // h closed by its destructor
    REQUIRE(s.read_file("/d/a.txt") == std::string("alpha\0\0\0", 8));

    s.symlink("a.txt", "/d/ln");
    REQUIRE(s.readlink("/d/ln") == "a.txt");
    REQUIRE(s.lstat("/d/ln").mode != s.stat("/d/ln").mode);
    s.link("/d/a.txt", "/d/hard");
    s.rename("/d/hard", "/d/hard2");
    s.rename("/d/hard2", "/d/a.txt", TXVFS_RENAME_EXCHANGE);
    s.unlink("/d/hard2");
    s.chmod("/d/a.txt", 0600);
    s.chown("/d/a.txt", TXVFS_ID_UNCHANGED, 77);
    s.utimens("/d/a.txt", 5, 6);
    auto st = s.stat("/d/a.txt");
    REQUIRE((st.mode & 0777) == 0600);
    REQUIRE(st.gid == 77);
    REQUIRE(st.mtime_ns == 6);
    s.truncate("/d/a.txt", 1);
    REQUIRE(s.read_file("/d/a.txt") == "a");
    s.rmdir("/d/e/f");

    s.setxattr("/d/a.txt", "user.k", "v1");
    s.setxattr("/d/a.txt", "user.j", std::string(5000, 'j'));
    REQUIRE(s.getxattr("/d/a.txt", "user.k") == "v1");
    REQUIRE(s.getxattr("/d/a.txt", "user.j").size() == 5000);
    REQUIRE(s.listxattr("/d/a.txt") == std::vector<std::string>{"user.j", "user.k"});
    s.removexattr("/d/a.txt", "user.j");
    REQUIRE(s.listxattr("/d/a.txt") == std::vector<std::string>{"user.k"});

    for (int i = 0; i < 600; i++) s.write_file("/d/e/n" + std::to_string(i), "");
    auto entries = s.readdir("/d/e");
    REQUIRE(entries.size() == 600);
    REQUIRE(entries.front().type == TXVFS_DT_REG);
    REQUIRE(s.statfs().name_max == 255);
    REQUIRE(s.block_size() == 65536);
    REQUIRE(s.inline_limit() == 4096);
    s.sync();
}

TEST_CASE("wrapper: options and transactions", "[cpp][tx]") {
    txvfs::options o;
    o.sync(false).block_size(4096).inline_limit(512).max_retries(5).read_only(false);
    txvfs::store s = txvfs::store::open("memory:", o);
    REQUIRE(s.block_size() == 4096);
    {
        txvfs::transaction tx = s.begin();
        tx.write_file("/a", "1");
        tx.write_file("/b", "2");
        REQUIRE(tx.read_file("/a") == "1");
        REQUIRE_FALSE(s.exists("/a"));
        txvfs::file f = tx.open("/c", O_WRONLY | O_CREAT);
        f.write("3");
        tx.commit();
        REQUIRE_THROWS_AS(f.write("x"), txvfs::error); // EBADF after commit
        try {
            tx.commit();
            FAIL("committed twice");
        } catch (const txvfs::error &e) {
            REQUIRE(e.code() == -EINVAL);
        }
    }
    REQUIRE(s.read_file("/c") == "3");
    {
        txvfs::transaction tx = s.begin();
        tx.write_file("/dropped", "x");
    } // destroyed uncommitted: rolled back
    REQUIRE_FALSE(s.exists("/dropped"));
    txvfs::transaction tx = s.begin();
    tx.write_file("/rolled", "x");
    tx.rollback();
    REQUIRE_FALSE(s.exists("/rolled"));

    txvfs::options bad;
    bad.block_size(3);
    REQUIRE_THROWS_AS(txvfs::store::open("memory:", bad), txvfs::error);
    bad.credential(1, 1, {2, 3});
}

TEST_CASE("wrapper: transact returns values, retries conflicts, propagates exceptions", "[cpp][tx][threads]") {
    txvfs::store s = txvfs::store::open("memory:");
    s.write_file("/n", "0");
    std::vector<std::thread> threads;
    std::atomic<int> errors{0};
    for (int t = 0; t < 4; t++) {
        threads.emplace_back([&] {
            for (int i = 0; i < 20; i++) {
                try {
                    txvfs::transact(s, [](txvfs::transaction &tx) {
                        int n = std::stoi(tx.read_file("/n"));
                        tx.write_file("/n", std::to_string(n + 1));
                    });
                } catch (...) {
                    errors++;
                }
            }
        });
    }
    for (auto &th : threads) th.join();
    REQUIRE(errors == 0);
    REQUIRE(s.read_file("/n") == "80");

    int v = txvfs::transact(s, [](txvfs::transaction &tx) { return std::stoi(tx.read_file("/n")) * 2; });
    REQUIRE(v == 160);
    std::string str = txvfs::transact(s, [](txvfs::transaction &tx) { return tx.read_file("/n"); });
    REQUIRE(str == "80");

    struct custom {};
    REQUIRE_THROWS_AS(txvfs::transact(s,
                                      [](txvfs::transaction &tx) {
                                          tx.write_file("/never", "x");
                                          throw custom{};
                                      }),
                      custom);
    REQUIRE_FALSE(s.exists("/never"));
    try {
        txvfs::transact(s, [](txvfs::transaction &tx) { tx.rmdir("/n"); });
        FAIL("no exception");
    } catch (const txvfs::error &e) {
        REQUIRE(e.code() == -ENOTDIR);
    }
    int runs = 0;
    txvfs::options o;
    o.max_retries(1);
    txvfs::store s2 = txvfs::store::open("memory:", o);
    try {
        txvfs::transact(s2, [&](txvfs::transaction &) {
            runs++;
            throw txvfs::error(-TXVFS_ECONFLICT, "simulated conflict");
        });
        FAIL("no exception");
    } catch (const txvfs::error &e) {
        REQUIRE(e.retryable());
    }
    REQUIRE(runs == 2);
}

TEST_CASE("wrapper: moved-from owners are inert", "[cpp]") {
    txvfs::store a = txvfs::store::open("memory:");
    txvfs::store b = std::move(a);
    b.write_file("/x", "y");
    REQUIRE(a.get() == nullptr);
    REQUIRE_THROWS_AS(a.stat("/x"), txvfs::error); // NULL store: EINVAL, not a crash
    txvfs::options o1;
    txvfs::options o2 = std::move(o1);
    REQUIRE_THROWS_AS(o1.sync(true), txvfs::error);
    o2.sync(true);
}

TEST_CASE("wrapper: a file's own block size", "[cpp]") {
    txvfs::store st = txvfs::store::open("memory:");
    txvfs::file f = st.open("/db", O_RDWR | O_CREAT);
    f.set_block_size(1024);
    REQUIRE(f.stat().blksize == 1024);
    REQUIRE_THROWS_AS(f.set_block_size(1000), txvfs::error);
}
