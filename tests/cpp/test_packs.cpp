// Pack images through the C ABI: txvfs_pack writes one, `pack:` opens it read-only.
#include "support.hpp"

#include <cstdio>
#include <string>

TEST_CASE("pack: a packed store reads back through the C ABI, writes fail with EROFS", "[packs]") {
    TempDir dir;
    std::string image = dir.path + "/img.pack";
    {
        Store src(dir.path + "/src");
        OK(txvfs_mkdir(src, nullptr, "/d", 0755));
        put(src, "/d/a.txt", "alpha");
        put(src, "/d/big", std::string(100000, 'b'));
        OK(txvfs_pack(src, image.c_str()));
        // Written after the pack: not in it.
        put(src, "/d/later", "x");
    }
    Store p("pack:" + image);
    REQUIRE(get(p, "/d/a.txt") == "alpha");
    REQUIRE(get(p, "/d/big") == std::string(100000, 'b'));
    txvfs_attr a;
    REQUIRE(txvfs_stat(p, nullptr, "/d/later", &a) == -ENOENT);
    REQUIRE(txvfs_write_file(p, nullptr, "/d/new", "x", 1) == -EROFS);
    REQUIRE(txvfs_unlink(p, nullptr, "/d/a.txt") == -EROFS);
    REQUIRE(get(p, "/d/a.txt") == "alpha");
    REQUIRE(txvfs_pack(p, nullptr) == -EINVAL);
}

TEST_CASE("pack: a damaged image is refused with TXVFS_ECORRUPT", "[packs]") {
    TempDir dir;
    std::string image = dir.path + "/img.pack";
    {
        Store src("memory:");
        put(src, "/f", "data");
        OK(txvfs_pack(src, image.c_str()));
    }
    FILE *f = std::fopen(image.c_str(), "r+b");
    REQUIRE(f != nullptr);
    std::fseek(f, 20, SEEK_SET);
    std::fputc(0x7f, f);
    std::fclose(f);
    txvfs_store *s = nullptr;
    REQUIRE(txvfs_store_open(("pack:" + image).c_str(), nullptr, &s) == -TXVFS_ECORRUPT);
    REQUIRE(std::string(txvfs_last_error()).find("corrupt pack image") != std::string::npos);
}
