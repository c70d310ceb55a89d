// Catch2's main, and one more role for tests that need a second process: with
// `--txvfs-test-owner DIR` the executable opens the shared store DIR (becoming the process that
// serves it), writes "1" to /a, prints "ready" and waits to be killed (see support.hpp's
// `spawn_owner`).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <txvfs.h>

#include <cstdio>
#include <cstring>
#include <unistd.h>

static int serve_store(const char *dir) {
    txvfs_store *s = nullptr;
    if (txvfs_store_open(dir, nullptr, &s) != 0 || txvfs_write_file(s, nullptr, "/a", "1", 1) != 0) {
        std::fprintf(stderr, "owner: %s\n", txvfs_last_error());
        return 1;
    }
    std::printf("ready\n");
    std::fflush(stdout);
    for (;;) pause();
}

int main(int argc, char **argv) {
    if (argc == 3 && std::strcmp(argv[1], "--txvfs-test-owner") == 0) return serve_store(argv[2]);
    return Catch::Session().run(argc, argv);
}
