// Version, errors, options and store handles.
#include "support.hpp"

#include <cstring>
#include <string>
#include <thread>

TEST_CASE("version: header macros match the library", "[basics]") {
    REQUIRE(std::string(txvfs_version()) == TXVFS_VERSION);
    std::string expect = std::to_string(TXVFS_VERSION_MAJOR) + "." + std::to_string(TXVFS_VERSION_MINOR) + "." +
                         std::to_string(TXVFS_VERSION_PATCH);
    REQUIRE(expect == TXVFS_VERSION);
}

TEST_CASE("strerror: fixed descriptions for negative and positive codes", "[basics]") {
    REQUIRE(std::string(txvfs_strerror(0)) == "success");
    REQUIRE(std::string(txvfs_strerror(-ENOENT)) == "no such file or directory");
    REQUIRE(std::string(txvfs_strerror(ENOENT)) == "no such file or directory");
    REQUIRE(std::string(txvfs_strerror(-TXVFS_ECONFLICT)) == "transaction conflict (retryable)");
    REQUIRE(std::string(txvfs_strerror(-TXVFS_ETOOLARGE)).find("too large") != std::string::npos);
    REQUIRE(std::string(txvfs_strerror(-TXVFS_ECORRUPT)).find("corrupt") != std::string::npos);
    REQUIRE(std::string(txvfs_strerror(-TXVFS_EBACKEND)).find("backend") != std::string::npos);
    REQUIRE(std::string(txvfs_strerror(-TXVFS_ETOOOLD)).find("retryable") != std::string::npos);
    REQUIRE(std::string(txvfs_strerror(-TXVFS_EPANIC)).find("panic") != std::string::npos);
    REQUIRE(std::string(txvfs_strerror(-EMFILE)).find("open files") != std::string::npos);
    REQUIRE(std::string(txvfs_strerror(123456)) == "unknown error");
    REQUIRE(std::string(txvfs_strerror(INT32_MIN)) == "unknown error");
    REQUIRE(txvfs_strerror(-ENOENT) == txvfs_strerror(-ENOENT)); // static, not reallocated
}

TEST_CASE("last_error: never NULL, per thread, names the function and the path", "[basics]") {
    REQUIRE(txvfs_last_error() != nullptr);
    Store s;
    txvfs_attr a;
    REQUIRE(txvfs_stat(s, nullptr, "/nope", &a) == -ENOENT);
    std::string msg = txvfs_last_error();
    REQUIRE(msg.find("txvfs_stat") != std::string::npos);
    REQUIRE(msg.find("/nope") != std::string::npos);
    // A success leaves it unchanged.
    OK(txvfs_stat(s, nullptr, "/", &a));
    REQUIRE(std::string(txvfs_last_error()) == msg);
    // The pointer stays valid; a later failure rewrites its text.
    const char *p = txvfs_last_error();
    REQUIRE(txvfs_mkdir(s, nullptr, "/nope/deeper", 0755) == -ENOENT);
    REQUIRE(txvfs_last_error() == p);
    REQUIRE(std::string(p).find("txvfs_mkdir") != std::string::npos);
    // Another thread has its own.
    std::string other;
    std::thread([&] { other = txvfs_last_error(); }).join();
    REQUIRE(other.empty());
}

TEST_CASE("options: every setter, and the store honours them", "[basics]") {
    txvfs_options *o = nullptr;
    OK(txvfs_options_new(&o));
    REQUIRE(o != nullptr);
    OK(txvfs_options_set_sync(o, false));
    OK(txvfs_options_set_block_size(o, 4096));
    OK(txvfs_options_set_inline_limit(o, 100));
    OK(txvfs_options_set_max_retries(o, 3));
    OK(txvfs_options_set_read_only(o, false));
    uint32_t groups[] = {5, 6};
    OK(txvfs_options_set_credential(o, 1000, 1000, groups, 2));
    {
        Store s("memory:", o);
        uint32_t v = 0;
        OK(txvfs_store_block_size(s, &v));
        REQUIRE(v == 4096);
        OK(txvfs_store_inline_limit(s, &v));
        REQUIRE(v == 100);
        // The root belongs to the process owner; as uid 1000 (not root) a 0755 root is not writable.
        if (getuid() != 1000) REQUIRE(txvfs_mkdir(s, nullptr, "/d", 0755) == -EACCES);
        OK(txvfs_store_sync(s));
    }
    txvfs_options_free(o);
    txvfs_options_free(nullptr);
}

TEST_CASE("options: invalid values fail at open with EINVAL, read-only refuses changes", "[basics]") {
    txvfs_options *o = nullptr;
    OK(txvfs_options_new(&o));
    OK(txvfs_options_set_block_size(o, 1000));
    txvfs_store *s = nullptr;
    REQUIRE(txvfs_store_open("memory:", o, &s) == -EINVAL);
    REQUIRE(s == nullptr);
    OK(txvfs_options_set_block_size(o, 65536));
    OK(txvfs_options_set_inline_limit(o, 70000));
    REQUIRE(txvfs_store_open("memory:", o, &s) == -EINVAL);
    OK(txvfs_options_set_inline_limit(o, 4096));
    OK(txvfs_options_set_read_only(o, true));
    REQUIRE(txvfs_store_open("memory:", o, &s) == -EROFS); // a new store cannot be created read-only
    REQUIRE(txvfs_options_set_credential(o, 1, 1, nullptr, 3) == -EINVAL);
    txvfs_options_free(o);

    TempDir dir;
    std::string uri = "rocksdb:" + dir.path + "/db";
    {
        Store w(uri);
        put(w, "/f", "data");
    }
    txvfs_options *ro = nullptr;
    OK(txvfs_options_new(&ro));
    OK(txvfs_options_set_read_only(ro, true));
    Store r(uri, ro);
    txvfs_options_free(ro);
    REQUIRE(get(r, "/f") == "data");
    REQUIRE(txvfs_mkdir(r, nullptr, "/d", 0755) == -EROFS);
}

TEST_CASE("store: RocksDB store keeps data across handles, a bare path is RocksDB", "[basics]") {
    TempDir dir;
    std::string path = dir.path + "/db";
    {
        Store s(path);
        put(s, "/kept", "across opens");
        OK(txvfs_store_sync(s));
    }
    Store again("rocksdb:" + path);
    REQUIRE(get(again, "/kept") == "across opens");
    txvfs_store *bad = nullptr;
    REQUIRE(txvfs_store_open("\xff\xfe", nullptr, &bad) == -EINVAL); // not UTF-8
    REQUIRE(bad == nullptr);
    txvfs_store_free(nullptr);
}

TEST_CASE("store: two memory: stores are separate", "[basics]") {
    Store a, b;
    put(a, "/only-in-a", "x");
    bool e = true;
    OK(txvfs_exists(b, nullptr, "/only-in-a", &e));
    REQUIRE_FALSE(e);
}

TEST_CASE("fsck: a clean store, the report text like snprintf, no store there, bad arguments", "[basics]") {
    TempDir d;
    std::string uri = d.path + "/store";
    {
        Store s(uri);
        OK(txvfs_mkdir_all(s, nullptr, "/a/b", 0755));
        OK(txvfs_write_file(s, nullptr, "/a/b/f", "data", 4));
    }
    txvfs_fsck_report r;
    OK(txvfs_fsck(uri.c_str(), 0, nullptr, 0, &r));
    REQUIRE(r.problems == 0);
    REQUIRE(r.repaired == 0);
    REQUIRE(r.keys_read > 3);
    REQUIRE(r.text_needed > 0);
    std::string whole(r.text_needed + 1, 'x');
    OK(txvfs_fsck(uri.c_str(), 0, &whole[0], whole.size(), &r));
    REQUIRE(std::strlen(whole.c_str()) == r.text_needed);
    char small[5];
    OK(txvfs_fsck(uri.c_str(), 0, small, sizeof small, &r));
    REQUIRE(std::strlen(small) == 4);
    REQUIRE(std::string(small) == whole.substr(0, 4));
    std::string missing = d.path + "/missing";
    REQUIRE(txvfs_fsck(missing.c_str(), 0, nullptr, 0, &r) == -ENOENT);
    REQUIRE(access(missing.c_str(), F_OK) != 0);
    REQUIRE(txvfs_fsck(nullptr, 0, nullptr, 0, &r) == -EINVAL);
    REQUIRE(txvfs_fsck(uri.c_str(), 0, nullptr, 0, nullptr) == -EINVAL);
    REQUIRE(txvfs_fsck(uri.c_str(), 0, nullptr, 8, &r) == -EINVAL);
}
