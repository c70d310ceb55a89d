// Path operations through the C API, auto-commit (tx NULL).
#include "support.hpp"

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <sys/stat.h>
#include <vector>

TEST_CASE("paths: mkdir, mkdir_all, stat, lstat, exists, rmdir", "[paths]") {
    Store s;
    OK(txvfs_mkdir(s, nullptr, "/d", 0750));
    OK(txvfs_mkdir_all(s, nullptr, "/d/e/f", 0700));
    OK(txvfs_mkdir_all(s, nullptr, "/d/e/f", 0700)); // existing is fine
    txvfs_attr a;
    OK(txvfs_stat(s, nullptr, "/d", &a));
    REQUIRE(S_ISDIR(a.mode));
    REQUIRE((a.mode & 07777) == 0750);
    REQUIRE(a.nlink == 3);
    REQUIRE(txvfs_mkdir(s, nullptr, "/d", 0755) == -EEXIST);
    REQUIRE(txvfs_rmdir(s, nullptr, "/d") == -ENOTEMPTY);
    OK(txvfs_rmdir(s, nullptr, "/d/e/f"));
    bool e = true;
    OK(txvfs_exists(s, nullptr, "/d/e/f", &e));
    REQUIRE_FALSE(e);
    OK(txvfs_exists(s, nullptr, "/d/e", &e));
    REQUIRE(e);
    put(s, "/file", "x");
    REQUIRE(txvfs_mkdir_all(s, nullptr, "/file/sub", 0755) == -ENOTDIR); // like mkdir -p
    OK(txvfs_exists(s, nullptr, "/file/sub", &e)); // ENOTDIR counts as absent
    REQUIRE_FALSE(e);
    REQUIRE(txvfs_rmdir(s, nullptr, "/") == -EBUSY);
    OK(txvfs_symlink(s, nullptr, "/d", "/link"));
    OK(txvfs_lstat(s, nullptr, "/link", &a));
    REQUIRE(S_ISLNK(a.mode));
    OK(txvfs_stat(s, nullptr, "/link", &a));
    REQUIRE(S_ISDIR(a.mode));
}

TEST_CASE("paths: write_file, read_file with size query and ERANGE, truncate, unlink", "[paths]") {
    Store s;
    put(s, "/f", "hello world");
    size_t n = 0;
    OK(txvfs_read_file(s, nullptr, "/f", nullptr, 0, &n));
    REQUIRE(n == 11);
    char small[4] = {'#', '#', '#', '#'};
    n = 99;
    REQUIRE(txvfs_read_file(s, nullptr, "/f", small, sizeof small, &n) == -ERANGE);
    REQUIRE(n == 99);            // out-parameter untouched on failure
    REQUIRE(small[0] == '#');    // nothing written
    REQUIRE(get(s, "/f") == "hello world");
    OK(txvfs_truncate(s, nullptr, "/f", 5));
    REQUIRE(get(s, "/f") == "hello");
    OK(txvfs_truncate(s, nullptr, "/f", 7));
    REQUIRE(get(s, "/f") == std::string("hello\0\0", 7));
    OK(txvfs_write_file(s, nullptr, "/empty", nullptr, 0));
    REQUIRE(get(s, "/empty").empty());
    REQUIRE(txvfs_read_file(s, nullptr, "/", nullptr, 0, &n) == -EISDIR);
    OK(txvfs_unlink(s, nullptr, "/f"));
    REQUIRE(txvfs_unlink(s, nullptr, "/f") == -ENOENT);
    OK(txvfs_mkdir(s, nullptr, "/dir", 0755));
    REQUIRE(txvfs_unlink(s, nullptr, "/dir") == -EISDIR);
    // A large file crosses many blocks.
    std::string big(300000, 'z');
    big[123456] = 'A';
    put(s, "/big", big);
    REQUIRE(get(s, "/big") == big);
}

TEST_CASE("paths: rename with flags, link, symlink, readlink", "[paths]") {
    Store s;
    put(s, "/a", "A");
    put(s, "/b", "B");
    REQUIRE(txvfs_rename(s, nullptr, "/a", "/b", TXVFS_RENAME_NOREPLACE) == -EEXIST);
    OK(txvfs_rename(s, nullptr, "/a", "/b", TXVFS_RENAME_EXCHANGE));
    REQUIRE(get(s, "/a") == "B");
    REQUIRE(get(s, "/b") == "A");
    OK(txvfs_rename(s, nullptr, "/a", "/b", 0));
    REQUIRE(get(s, "/b") == "B");
    REQUIRE(get(s, "/a") == "<error -2>");
    REQUIRE(txvfs_rename(s, nullptr, "/b", "/c", 4) == -EINVAL);
    REQUIRE(txvfs_rename(s, nullptr, "/b", "/c", TXVFS_RENAME_NOREPLACE | TXVFS_RENAME_EXCHANGE) == -EINVAL);
    OK(txvfs_mkdir(s, nullptr, "/d", 0755));
    REQUIRE(txvfs_rename(s, nullptr, "/d", "/d/sub", 0) == -EINVAL);

    OK(txvfs_link(s, nullptr, "/b", "/hard"));
    txvfs_attr a;
    OK(txvfs_stat(s, nullptr, "/b", &a));
    REQUIRE(a.nlink == 2);
    REQUIRE(txvfs_link(s, nullptr, "/d", "/dlink") == -EPERM);

    OK(txvfs_symlink(s, nullptr, "b", "/sym"));
    REQUIRE(get(s, "/sym") == "B");
    size_t n = 0;
    OK(txvfs_readlink(s, nullptr, "/sym", nullptr, 0, &n));
    REQUIRE(n == 1);
    char buf[8] = {'#', '#', '#', '#', '#', '#', '#', '#'};
    REQUIRE(txvfs_readlink(s, nullptr, "/sym", buf, 1, &n) == -ERANGE); // no room for the NUL
    OK(txvfs_readlink(s, nullptr, "/sym", buf, sizeof buf, &n));
    REQUIRE(std::string(buf) == "b");
    REQUIRE(txvfs_readlink(s, nullptr, "/b", buf, sizeof buf, &n) == -EINVAL);
    OK(txvfs_symlink(s, nullptr, "/loop2", "/loop1"));
    OK(txvfs_symlink(s, nullptr, "/loop1", "/loop2"));
    REQUIRE(txvfs_stat(s, nullptr, "/loop1", &a) == -ELOOP);
}

TEST_CASE("paths: chmod, chown, utimens", "[paths]") {
    Store s;
    put(s, "/f", "x");
    OK(txvfs_chmod(s, nullptr, "/f", 0600));
    txvfs_attr a;
    OK(txvfs_stat(s, nullptr, "/f", &a));
    REQUIRE((a.mode & 07777) == 0600);
    REQUIRE(S_ISREG(a.mode));
    uint32_t uid = a.uid;
    OK(txvfs_chown(s, nullptr, "/f", TXVFS_ID_UNCHANGED, 4242));
    OK(txvfs_stat(s, nullptr, "/f", &a));
    REQUIRE(a.uid == uid);
    REQUIRE(a.gid == 4242);
    OK(txvfs_utimens(s, nullptr, "/f", 1000000000, 2000000000));
    OK(txvfs_stat(s, nullptr, "/f", &a));
    REQUIRE(a.atime_ns == 1000000000);
    REQUIRE(a.mtime_ns == 2000000000);
    OK(txvfs_utimens(s, nullptr, "/f", TXVFS_UTIME_OMIT, TXVFS_UTIME_NOW));
    OK(txvfs_stat(s, nullptr, "/f", &a));
    REQUIRE(a.atime_ns == 1000000000);
    REQUIRE(a.mtime_ns > 2000000000);
}

TEST_CASE("paths: readdir pages with the cursor", "[paths]") {
    Store s;
    OK(txvfs_mkdir(s, nullptr, "/d", 0755));
    std::set<std::string> want;
    for (int i = 0; i < 23; i++) {
        std::string p = "/d/f" + std::to_string(i);
        put(s, p.c_str(), "x");
        want.insert("f" + std::to_string(i));
    }
    OK(txvfs_mkdir(s, nullptr, "/d/sub", 0755));
    OK(txvfs_symlink(s, nullptr, "f1", "/d/ln"));
    want.insert("sub");
    want.insert("ln");

    std::vector<std::string> got;
    txvfs_dirent page[5];
    std::string after;
    int pages = 0;
    for (;;) {
        size_t n = 0;
        OK(txvfs_readdir(s, nullptr, "/d", got.empty() ? nullptr : after.c_str(), page, 5, &n));
        pages++;
        for (size_t i = 0; i < n; i++) {
            REQUIRE(page[i].name_len == strlen(page[i].name));
            got.push_back(page[i].name);
            if (got.back() == "sub") REQUIRE(page[i].type == TXVFS_DT_DIR);
            if (got.back() == "ln") REQUIRE(page[i].type == TXVFS_DT_LNK);
            if (got.back() == "f0") REQUIRE(page[i].type == TXVFS_DT_REG);
            REQUIRE(page[i].ino > 0);
        }
        if (n < 5) break;
        after = got.back();
    }
    REQUIRE(pages == 6);
    REQUIRE(std::set<std::string>(got.begin(), got.end()) == want);
    REQUIRE(got.size() == want.size());
    REQUIRE(std::is_sorted(got.begin(), got.end()));
    size_t n = 7;
    OK(txvfs_readdir(s, nullptr, "/d", nullptr, nullptr, 0, &n)); // capacity 0: nothing to do
    REQUIRE(n == 0);
    REQUIRE(txvfs_readdir(s, nullptr, "/d/f1", nullptr, page, 5, &n) == -ENOTDIR);
    // A 255-byte name fits the entry's buffer.
    std::string longname(255, 'n');
    put(s, ("/d/" + longname).c_str(), "x");
    OK(txvfs_readdir(s, nullptr, "/d", "ln", page, 1, &n));
    REQUIRE(n == 1);
    REQUIRE(std::string(page[0].name) == longname);
    REQUIRE(page[0].name_len == 255);
}

TEST_CASE("paths: xattrs with size queries, flags and list", "[paths]") {
    Store s;
    put(s, "/f", "x");
    OK(txvfs_setxattr(s, nullptr, "/f", "user.a", "alpha", 5, 0));
    OK(txvfs_setxattr(s, nullptr, "/f", "user.b", "", 0, TXVFS_XATTR_CREATE));
    REQUIRE(txvfs_setxattr(s, nullptr, "/f", "user.a", "x", 1, TXVFS_XATTR_CREATE) == -EEXIST);
    REQUIRE(txvfs_setxattr(s, nullptr, "/f", "user.c", "x", 1, TXVFS_XATTR_REPLACE) == -ENODATA);
    REQUIRE(txvfs_setxattr(s, nullptr, "/f", "user.c", "x", 1, 7) == -EINVAL);
    OK(txvfs_setxattr(s, nullptr, "/f", "user.a", "ALPHA!", 6, TXVFS_XATTR_REPLACE));
    size_t n = 0;
    OK(txvfs_getxattr(s, nullptr, "/f", "user.a", nullptr, 0, &n));
    REQUIRE(n == 6);
    char buf[16];
    REQUIRE(txvfs_getxattr(s, nullptr, "/f", "user.a", buf, 3, &n) == -ERANGE);
    OK(txvfs_getxattr(s, nullptr, "/f", "user.a", buf, sizeof buf, &n));
    REQUIRE(std::string(buf, n) == "ALPHA!");
    OK(txvfs_getxattr(s, nullptr, "/f", "user.b", buf, sizeof buf, &n));
    REQUIRE(n == 0);
    REQUIRE(txvfs_getxattr(s, nullptr, "/f", "user.none", buf, sizeof buf, &n) == -ENODATA);
    OK(txvfs_listxattr(s, nullptr, "/f", nullptr, 0, &n));
    REQUIRE(n == 14);
    char names[32];
    REQUIRE(txvfs_listxattr(s, nullptr, "/f", names, 10, &n) == -ERANGE);
    OK(txvfs_listxattr(s, nullptr, "/f", names, sizeof names, &n));
    REQUIRE(std::string(names, n) == std::string("user.a\0user.b\0", 14));
    OK(txvfs_removexattr(s, nullptr, "/f", "user.a"));
    REQUIRE(txvfs_removexattr(s, nullptr, "/f", "user.a") == -ENODATA);
    OK(txvfs_listxattr(s, nullptr, "/f", names, sizeof names, &n));
    REQUIRE(std::string(names, n) == std::string("user.b\0", 7));
    REQUIRE(txvfs_setxattr(s, nullptr, "/f", "", "x", 1, 0) < 0);
}

TEST_CASE("paths: statfs counts files", "[paths]") {
    Store s;
    txvfs_usage u0, u1;
    OK(txvfs_statfs(s, nullptr, &u0));
    REQUIRE(u0.name_max == 255);
    REQUIRE(u0.block_size > 0);
    for (int i = 0; i < 10; i++) put(s, ("/f" + std::to_string(i)).c_str(), std::string(1000, 'x'));
    OK(txvfs_statfs(s, nullptr, &u1));
    REQUIRE(u1.files == u0.files + 10);
}
