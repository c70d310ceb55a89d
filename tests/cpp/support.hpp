// Shared helpers of the Catch2 suite: a store owner, temporary directories, short C calls.
#pragma once

#include <catch2/catch.hpp>
#include <txvfs.h>

#include <cerrno>
#include <cstdlib>
#include <csignal>
#include <fcntl.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

/** A store handle owned by the test (memory: unless another URI is given). */
struct Store {
    txvfs_store *s = nullptr;
    explicit Store(const std::string &uri = "memory:", const txvfs_options *o = nullptr) {
        int rc = txvfs_store_open(uri.c_str(), o, &s);
        INFO(txvfs_last_error());
        REQUIRE(rc == 0);
    }
    ~Store() { txvfs_store_free(s); }
    Store(const Store &) = delete;
    Store &operator=(const Store &) = delete;
    operator txvfs_store *() const { return s; }
};

/** A fresh temporary directory, removed with its contents at the end of the test. */
struct TempDir {
    std::string path;
    TempDir() {
        char tmpl[] = "/tmp/txvfs-cpp-XXXXXX";
        REQUIRE(mkdtemp(tmpl) != nullptr);
        path = tmpl;
    }
    ~TempDir() {
        std::string cmd = "rm -rf '" + path + "'";
        if (std::system(cmd.c_str()) != 0) WARN("could not remove " << path);
    }
};

/** Writes `data` to `path` (auto-commit); requires success. */
inline void put(txvfs_store *s, const char *path, const std::string &data, txvfs_tx *tx = nullptr) {
    int rc = txvfs_write_file(s, tx, path, data.data(), data.size());
    INFO(path << ": " << txvfs_last_error());
    REQUIRE(rc == 0);
}

/** The contents of `path`, or "<error N>". */
inline std::string get(txvfs_store *s, const char *path, txvfs_tx *tx = nullptr) {
    size_t n = 0;
    int rc = txvfs_read_file(s, tx, path, nullptr, 0, &n);
    if (rc < 0) return "<error " + std::to_string(rc) + ">";
    std::string out(n, '\0');
    rc = txvfs_read_file(s, tx, path, out.data(), out.size(), &n);
    if (rc < 0) return "<error " + std::to_string(rc) + ">";
    out.resize(n);
    return out;
}

/** Opens `path`; requires success. */
inline int open_fd(txvfs_store *s, const char *path, int flags, txvfs_tx *tx = nullptr) {
    int fd = -1;
    int rc = txvfs_open(s, tx, path, flags, 0644, &fd);
    INFO(path << ": " << txvfs_last_error());
    REQUIRE(rc == 0);
    REQUIRE(fd > 0);
    return fd;
}

/** Requires `call` to return 0, showing the last error otherwise. */
#define OK(call)                                  \
    do {                                          \
        int rc_ = (call);                         \
        INFO(#call << ": " << txvfs_last_error()); \
        REQUIRE(rc_ == 0);                        \
    } while (0)

/** A second process (this executable, see main.cpp) serving the shared store `dir`, with "1"
 * at /a; killed (SIGKILL) by `kill_owner` or at the end of the test. */
struct Owner {
    pid_t pid = -1;
    explicit Owner(const std::string &dir) {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        REQUIRE(n > 0);
        self[n] = '\0';
        int out[2];
        REQUIRE(pipe(out) == 0);
        pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            dup2(out[1], 1);
            close(out[0]);
            close(out[1]);
            execl(self, self, "--txvfs-test-owner", dir.c_str(), static_cast<char *>(nullptr));
            _exit(127);
        }
        close(out[1]);
        char buf[6] = {0};
        ssize_t got = read(out[0], buf, sizeof buf);
        close(out[0]);
        REQUIRE(std::string(buf, got > 0 ? size_t(got) : 0) == "ready\n");
    }
    void kill_owner() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
            pid = -1;
        }
    }
    ~Owner() { kill_owner(); }
    Owner(const Owner &) = delete;
    Owner &operator=(const Owner &) = delete;
};
