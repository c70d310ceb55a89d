// Quotas through the C API and the C++ wrapper: set, get, remove; EDQUOT naming the tree and
// changing nothing; EXDEV across trees; bad input; a transaction keeps its quota changes.
#include "support.hpp"

#include <txvfs.hpp>

#include <cstring>
#include <string>

TEST_CASE("quota: set, get, EDQUOT, EXDEV, remove (C API)", "[quota]") {
    Store s;
    OK(txvfs_mkdir(s, nullptr, "/q", 0755));
    OK(txvfs_mkdir(s, nullptr, "/o", 0755));
    bool found = true;
    txvfs_quota q;
    std::memset(&q, 0xab, sizeof q);
    OK(txvfs_quota_get(s, nullptr, "/q", &found, &q));
    REQUIRE_FALSE(found);
    REQUIRE(q.tree == 0xababababababababull); // untouched when there is none
    OK(txvfs_quota_set(s, nullptr, "/q", 1000, 3));
    OK(txvfs_quota_get(s, nullptr, "/q", &found, &q));
    REQUIRE(found);
    REQUIRE(q.bytes_limit == 1000);
    REQUIRE(q.inodes_limit == 3);
    REQUIRE(q.bytes_used == 0);
    REQUIRE(q.inodes_used == 1); // the top directory
    REQUIRE(q.parent == 0);
    put(s, "/q/a", std::string(600, 'a'));
    std::string big(401, 'b');
    REQUIRE(txvfs_write_file(s, nullptr, "/q/b", big.data(), big.size()) == -EDQUOT);
    REQUIRE(std::string(txvfs_last_error()).find("/q:") != std::string::npos);
    bool e = true;
    OK(txvfs_exists(s, nullptr, "/q/b", &e));
    REQUIRE_FALSE(e);
    put(s, "/q/b", std::string(400, 'b'));
    REQUIRE(txvfs_mkdir(s, nullptr, "/q/d", 0755) == -EDQUOT); // 3 inodes
    OK(txvfs_quota_get(s, nullptr, "/q/a", &found, &q));
    REQUIRE(q.bytes_used == 1000);
    REQUIRE(q.inodes_used == 3);
    put(s, "/o/x", "x");
    REQUIRE(txvfs_rename(s, nullptr, "/o/x", "/q/x", 0) == -EXDEV);
    REQUIRE(txvfs_link(s, nullptr, "/q/a", "/o/a") == -EXDEV);
    OK(txvfs_unlink(s, nullptr, "/q/b")); // frees give the space back
    put(s, "/q/c", std::string(400, 'c'));
    OK(txvfs_quota_remove(s, nullptr, "/q"));
    OK(txvfs_quota_get(s, nullptr, "/q", &found, &q));
    REQUIRE_FALSE(found);
    REQUIRE(txvfs_quota_remove(s, nullptr, "/q") == -ENOENT);
    OK(txvfs_rename(s, nullptr, "/o/x", "/q/x", 0));
}

TEST_CASE("quota: bad input changes nothing", "[quota]") {
    Store s;
    OK(txvfs_mkdir(s, nullptr, "/d", 0755));
    put(s, "/f", "file");
    bool found = false;
    txvfs_quota q;
    REQUIRE(txvfs_quota_set(s, nullptr, "/d", 0, 0) == -EINVAL); // no limit
    REQUIRE(txvfs_quota_set(s, nullptr, "/d", UINT64_MAX, 0) == -EINVAL);
    REQUIRE(std::string(txvfs_last_error()).find("/d: the byte limit") != std::string::npos);
    REQUIRE(txvfs_quota_set(s, nullptr, "/f", 10, 0) == -ENOTDIR);
    REQUIRE(txvfs_quota_set(s, nullptr, "/nope", 10, 0) == -ENOENT);
    REQUIRE(txvfs_quota_set(s, nullptr, nullptr, 10, 0) == -EINVAL);
    REQUIRE(txvfs_quota_set(nullptr, nullptr, "/d", 10, 0) == -EINVAL);
    REQUIRE(txvfs_quota_get(s, nullptr, "/d", nullptr, &q) == -EINVAL);
    REQUIRE(txvfs_quota_get(s, nullptr, "/d", &found, nullptr) == -EINVAL);
    REQUIRE(txvfs_quota_get(s, nullptr, "/nope", &found, &q) == -ENOENT);
    REQUIRE(txvfs_quota_remove(s, nullptr, "/d") == -ENOENT);
    REQUIRE(txvfs_quota_remove(s, nullptr, nullptr) == -EINVAL);
    OK(txvfs_quota_get(s, nullptr, "/d", &found, &q));
    REQUIRE_FALSE(found);
}

TEST_CASE("quota: the C++ wrapper, in a transaction", "[quota][cpp]") {
    txvfs::store s = txvfs::store::open("memory:");
    s.mkdir("/jobs");
    REQUIRE_FALSE(s.quota("/jobs").has_value());
    {
        txvfs::transaction tx = s.begin();
        tx.quota_set("/jobs", 10, 0);
        tx.write_file("/jobs/a", "0123456789");
        tx.commit();
    }
    auto q = s.quota("/jobs/a");
    REQUIRE(q.has_value());
    REQUIRE(q->bytes_limit == 10);
    REQUIRE(q->inodes_limit == 0);
    REQUIRE(q->bytes_used == 10);
    try {
        s.write_file("/jobs/b", "!");
        FAIL("no exception");
    } catch (const txvfs::error &e) {
        REQUIRE(e.code() == -EDQUOT);
        REQUIRE(std::string(e.what()).find("/jobs:") != std::string::npos);
    }
    REQUIRE_FALSE(s.exists("/jobs/b"));
    s.quota_remove("/jobs");
    REQUIRE_FALSE(s.quota("/jobs").has_value());
    s.write_file("/jobs/b", "!");
}
