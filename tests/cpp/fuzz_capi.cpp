// Seeded random driver for the C API: long random sequences of calls with valid and invalid
// arguments (NULL pointers, bad paths, stale/forged/foreign descriptors, finished/foreign
// transactions, unknown and garbage tokens to join, odd flags and sizes). It checks the ABI's
// promises on every call:
//   - the return is 0 or negative, and txvfs_last_error() is never NULL;
//   - out-parameters are untouched when a call fails;
//   - no crash, no leak (built with ASan/UBSan by CMake; LeakSanitizer runs at exit);
//   - a store freed while descriptors and transactions are open stays usable through them
//     (free_store_first).
// It only breaks no documented rule itself (no use after free).
//
//   fuzz_capi [--seed N] [--ops N] [--seconds S]     (a failing seed reruns exactly)
#include <txvfs.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

std::mt19937_64 rng;
long long calls = 0, failures_seen = 0, freed_first = 0;
std::map<int, long long> codes;

[[noreturn]] void die(const std::string &what) {
    std::fprintf(stderr, "fuzz_capi: invariant broken after %lld calls: %s\n", calls, what.c_str());
    std::exit(1);
}

size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }
bool chance(int percent) { return (int)pick(100) < percent; }

/** Records and checks one return code. */
int check(int rc, const char *fn) {
    calls++;
    if (rc > 0) die(std::string(fn) + " returned positive " + std::to_string(rc));
    if (txvfs_last_error() == nullptr) die(std::string(fn) + ": txvfs_last_error() is NULL");
    if (rc < 0) {
        failures_seen++;
        codes[-rc]++;
        if (rc == -TXVFS_EPANIC) die(std::string(fn) + " panicked: " + txvfs_last_error());
    }
    return rc;
}
#define CALL(fn, ...) check(fn(__VA_ARGS__), #fn)

/** An out-parameter filled with a sentinel; `untouched` after a failed call is required. */
template <class T>
struct Sentinel {
    T v;
    Sentinel() { std::memset(&v, 0xA5, sizeof v); }
    bool untouched() const {
        Sentinel<T> fresh;
        return std::memcmp(&v, &fresh.v, sizeof v) == 0;
    }
};
#define EXPECT_UNTOUCHED(rc, s, fn) \
    do { if ((rc) < 0 && !(s).untouched()) die(std::string(fn) + " wrote its out-parameter on failure"); } while (0)

struct World {
    txvfs_options *options = nullptr; // of both stores
    txvfs_store *stores[2] = {nullptr, nullptr};
    std::vector<int> fds[2];     // open descriptors per store
    std::vector<int> closed;     // descriptors closed already (stale)
    std::vector<txvfs_tx *> txs[2];
    std::vector<txvfs_tx *> done[2]; // committed or rolled back, not yet freed
};

const std::vector<std::string> base_paths = {
    "/", "/a", "/b", "/d", "/d/x", "/d/y", "/d/e", "/d/e/z", "/l", "/a/", "/d/../a", "/./b", "/nope/x",
    "", "rel", "//d//x", "/d/e/../../a"};

/** A token for txvfs_tx_join: the shape the SQLite VFS gives them, or garbage. */
std::string random_token() {
    switch (pick(4)) {
    case 0: return "txvfs-tx-" + std::to_string(pick(100000)) + "-" + std::to_string(pick(100));
    case 1: return "";
    case 2: return std::string("txvfs-tx-\xff\xfe");
    default: return std::string(pick(5000), 'x');
    }
}

std::string random_path() {
    switch (pick(20)) {
    case 0: return "/" + std::string(256, 'n');                      // name too long
    case 1: { std::string p; while (p.size() <= 4096) p += "/abc"; return p; } // path too long
    case 2: return "/" + std::string(1 + pick(255), 'k');
    case 3: return std::string("/\xff\xfe bytes");
    default: return base_paths[pick(base_paths.size())];
    }
}

/** NULL sometimes, otherwise a random path kept alive in `keep`. */
const char *path_arg(std::string &keep) {
    if (chance(3)) return nullptr;
    keep = random_path();
    return keep.c_str();
}

int fd_arg(World &w, int si) {
    int r = (int)pick(10);
    if (r < 6 && !w.fds[si].empty()) return w.fds[si][pick(w.fds[si].size())];
    if (r == 6 && !w.closed.empty()) return w.closed[pick(w.closed.size())];
    if (r == 7 && !w.fds[1 - si].empty()) return w.fds[1 - si][pick(w.fds[1 - si].size())];
    if (r == 8) return (int)(rng() & 0x7fffffff);
    static const int odd[] = {0, 1, 2, -1, INT_MIN, INT_MAX, 65536, 65537};
    return odd[pick(8)];
}

txvfs_tx *tx_arg(World &w, int si) {
    int r = (int)pick(10);
    if (r < 4) return nullptr;
    if (r < 8 && !w.txs[si].empty()) return w.txs[si][pick(w.txs[si].size())];
    if (r == 8 && !w.done[si].empty()) return w.done[si][pick(w.done[si].size())];
    if (r == 9 && !w.txs[1 - si].empty()) return w.txs[1 - si][pick(w.txs[1 - si].size())];
    return nullptr;
}

size_t len_arg() {
    switch (pick(6)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return pick(100);
    case 3: return pick(5000);
    default: return pick(70000);
    }
}

std::vector<char> buffer(1 << 17);

void *buf_arg(size_t len) { return (len > 0 && chance(3)) ? nullptr : buffer.data(); }

struct CallbackState {
    World *w;
    int si;
    int ops;
};

void step(World &w, int si);

/**
 * Frees store `si` while its descriptors and transactions are still open (they keep it alive),
 * uses each of them once more through the freed handle, ends them in random order (the last
 * one frees the store), and opens a new store in its place.
 */
void free_store_first(World &w, int si) {
    txvfs_store *old = w.stores[si];
    txvfs_store_free(old);
    freed_first++;
    std::vector<int> fds = std::move(w.fds[si]);
    std::vector<txvfs_tx *> txs = std::move(w.txs[si]);
    for (auto *t : w.done[si]) txs.push_back(t);
    w.fds[si].clear(), w.txs[si].clear(), w.done[si].clear();
    while (!fds.empty() || !txs.empty()) {
        if (!fds.empty() && (txs.empty() || chance(50))) {
            size_t i = pick(fds.size());
            int fd = fds[i];
            fds[i] = fds.back(), fds.pop_back();
            Sentinel<txvfs_attr> a;
            int rc = CALL(txvfs_fstat, old, fd, &a.v);
            EXPECT_UNTOUCHED(rc, a, "txvfs_fstat");
            CALL(txvfs_close, old, fd);
            w.closed.push_back(fd);
        } else {
            size_t i = pick(txs.size());
            txvfs_tx *t = txs[i];
            txs[i] = txs.back(), txs.pop_back();
            Sentinel<txvfs_attr> a;
            int rc = CALL(txvfs_stat, old, t, "/", &a.v);
            EXPECT_UNTOUCHED(rc, a, "txvfs_stat");
            if (chance(50)) CALL(txvfs_tx_commit, t);
            txvfs_tx_free(t);
        }
    }
    if (txvfs_store_open("memory:", w.options, &w.stores[si]) != 0) die(std::string("open: ") + txvfs_last_error());
}

int callback(txvfs_tx *tx, void *userdata) {
    auto *st = static_cast<CallbackState *>(userdata);
    txvfs_store *s = st->w->stores[st->si];
    std::string p;
    for (int i = 0; i < st->ops; i++) {
        const char *path = path_arg(p);
        std::string data(pick(100), 'c');
        int rc = chance(50) ? CALL(txvfs_write_file, s, tx, path, data.data(), data.size())
                            : CALL(txvfs_mkdir, s, tx, path, 0755);
        if (rc < 0 && chance(20)) return rc;
    }
    if (chance(5)) CALL(txvfs_tx_commit, tx); // refused: owned by txvfs_transact
    return chance(10) ? -ECANCELED : 0;
}

void step(World &w, int si) {
    txvfs_store *s = chance(2) ? nullptr : w.stores[si];
    std::string k1, k2;
    size_t len = len_arg();
    int rc;
    switch (pick(40)) {
    case 0: case 1: { // open
        Sentinel<int> fd;
        static const int flags[] = {O_RDONLY, O_WRONLY, O_RDWR, O_RDWR | O_CREAT, O_WRONLY | O_CREAT | O_TRUNC,
                                    O_RDWR | O_CREAT | O_EXCL, O_WRONLY | O_APPEND | O_CREAT, O_RDONLY | O_NOFOLLOW,
                                    O_RDWR | O_CREAT | TXVFS_O_WRITE_BACK, 3, -1};
        rc = CALL(txvfs_open, s, tx_arg(w, si), path_arg(k1), flags[pick(11)], (uint32_t)rng(), chance(3) ? nullptr : &fd.v);
        EXPECT_UNTOUCHED(rc, fd, "txvfs_open");
        if (rc == 0) w.fds[si].push_back(fd.v);
        break;
    }
    case 2: { // close
        int fd = fd_arg(w, si);
        rc = CALL(txvfs_close, s, fd);
        if (rc != -EINVAL) { // closed (even on a flush error) unless the store was NULL
            for (auto &v : w.fds[si])
                if (v == fd) { v = w.fds[si].back(); w.fds[si].pop_back(); w.closed.push_back(fd); break; }
        }
        break;
    }
    case 3: case 4: { Sentinel<size_t> n; rc = CALL(txvfs_read, s, fd_arg(w, si), buf_arg(len), len, chance(3) ? nullptr : &n.v); EXPECT_UNTOUCHED(rc, n, "txvfs_read"); break; }
    case 5: { Sentinel<size_t> n; rc = CALL(txvfs_pread, s, fd_arg(w, si), buf_arg(len), len, rng() % 200000, &n.v); EXPECT_UNTOUCHED(rc, n, "txvfs_pread"); break; }
    case 6: case 7: { Sentinel<size_t> n; rc = CALL(txvfs_write, s, fd_arg(w, si), buf_arg(len), len, &n.v); EXPECT_UNTOUCHED(rc, n, "txvfs_write"); if (rc == 0 && n.v != len) die("short write"); break; }
    case 8: { Sentinel<size_t> n; rc = CALL(txvfs_pwrite, s, fd_arg(w, si), buf_arg(len), len, rng() % 200000, &n.v); EXPECT_UNTOUCHED(rc, n, "txvfs_pwrite"); break; }
    case 9: { Sentinel<uint64_t> pos; rc = CALL(txvfs_lseek, s, fd_arg(w, si), (int64_t)(rng() % 2000) - 1000, (int)pick(4), &pos.v); EXPECT_UNTOUCHED(rc, pos, "txvfs_lseek"); break; }
    case 10: CALL(txvfs_ftruncate, s, fd_arg(w, si), rng() % 100000); break;
    case 11: CALL(txvfs_fallocate, s, fd_arg(w, si), (int)pick(5), rng() % 100000, rng() % 100000); break;
    case 12: CALL(txvfs_fsync, s, fd_arg(w, si)); break;
    case 13: { Sentinel<txvfs_attr> a; rc = CALL(txvfs_fstat, s, fd_arg(w, si), &a.v); EXPECT_UNTOUCHED(rc, a, "txvfs_fstat"); break; }
    case 14: CALL(txvfs_flock, s, fd_arg(w, si), (int)pick(16) | TXVFS_LOCK_NB); break;
    case 15: CALL(txvfs_setlk, s, fd_arg(w, si), (int)pick(4), rng() % 100, rng() % 100, false); break;
    case 16: { Sentinel<txvfs_lock> l; rc = CALL(txvfs_getlk, s, fd_arg(w, si), chance(50), rng() % 100, rng() % 100, &l.v); EXPECT_UNTOUCHED(rc, l, "txvfs_getlk"); break; }
    case 17: { Sentinel<txvfs_attr> a; rc = CALL(txvfs_stat, s, tx_arg(w, si), path_arg(k1), chance(3) ? nullptr : &a.v); EXPECT_UNTOUCHED(rc, a, "txvfs_stat"); break; }
    case 18: { Sentinel<txvfs_attr> a; rc = CALL(txvfs_lstat, s, tx_arg(w, si), path_arg(k1), &a.v); EXPECT_UNTOUCHED(rc, a, "txvfs_lstat"); break; }
    case 19: { Sentinel<bool> e; rc = CALL(txvfs_exists, s, tx_arg(w, si), path_arg(k1), &e.v); EXPECT_UNTOUCHED(rc, e, "txvfs_exists"); break; }
    case 20: CALL(txvfs_mkdir, s, tx_arg(w, si), path_arg(k1), (uint32_t)rng()); break;
    case 21: CALL(txvfs_mkdir_all, s, tx_arg(w, si), path_arg(k1), 0755); break;
    case 22: CALL(txvfs_rmdir, s, tx_arg(w, si), path_arg(k1)); break;
    case 23: CALL(txvfs_unlink, s, tx_arg(w, si), path_arg(k1)); break;
    case 24: CALL(txvfs_rename, s, tx_arg(w, si), path_arg(k1), path_arg(k2), (uint32_t)pick(5)); break;
    case 25: CALL(txvfs_link, s, tx_arg(w, si), path_arg(k1), path_arg(k2)); break;
    case 26: CALL(txvfs_symlink, s, tx_arg(w, si), path_arg(k1), path_arg(k2)); break;
    case 27: { Sentinel<size_t> n; size_t cap = pick(3) == 0 ? 0 : pick(300); rc = CALL(txvfs_readlink, s, tx_arg(w, si), path_arg(k1), cap ? buffer.data() : nullptr, cap, &n.v); EXPECT_UNTOUCHED(rc, n, "txvfs_readlink"); break; }
    case 28: CALL(txvfs_chmod, s, tx_arg(w, si), path_arg(k1), (uint32_t)rng()); break;
    case 29: CALL(txvfs_chown, s, tx_arg(w, si), path_arg(k1), chance(50) ? TXVFS_ID_UNCHANGED : (uint32_t)rng(), (uint32_t)pick(3)); break;
    case 30: CALL(txvfs_utimens, s, tx_arg(w, si), path_arg(k1), chance(30) ? TXVFS_UTIME_NOW : (int64_t)rng(), chance(30) ? TXVFS_UTIME_OMIT : -(int64_t)pick(1000)); break;
    case 31: CALL(txvfs_truncate, s, tx_arg(w, si), path_arg(k1), rng() % 300000); break;
    case 32: {
        static txvfs_dirent page[8];
        Sentinel<size_t> n;
        const char *after = chance(50) ? nullptr : (chance(50) ? "x" : "a/b");
        size_t cap = pick(9);
        rc = CALL(txvfs_readdir, s, tx_arg(w, si), path_arg(k1), after, chance(3) ? nullptr : page, cap, &n.v);
        EXPECT_UNTOUCHED(rc, n, "txvfs_readdir");
        break;
    }
    case 33: { Sentinel<size_t> n; rc = CALL(txvfs_read_file, s, tx_arg(w, si), path_arg(k1), buf_arg(len), len, &n.v); EXPECT_UNTOUCHED(rc, n, "txvfs_read_file"); break; }
    case 34: CALL(txvfs_write_file, s, tx_arg(w, si), path_arg(k1), buf_arg(len), len); break;
    case 35: { // xattrs
        static const char *names[] = {"user.a", "user.b", "", "trusted.x", nullptr};
        const char *name = names[pick(5)];
        Sentinel<size_t> n;
        size_t cap = pick(2) ? pick(300) : 0;
        switch (pick(4)) {
        case 0: CALL(txvfs_setxattr, s, tx_arg(w, si), path_arg(k1), name, buffer.data(), pick(300), (int)pick(4)); break;
        case 1: rc = CALL(txvfs_getxattr, s, tx_arg(w, si), path_arg(k1), name, cap ? buffer.data() : nullptr, cap, &n.v); EXPECT_UNTOUCHED(rc, n, "txvfs_getxattr"); break;
        case 2: rc = CALL(txvfs_listxattr, s, tx_arg(w, si), path_arg(k1), cap ? buffer.data() : nullptr, cap, &n.v); EXPECT_UNTOUCHED(rc, n, "txvfs_listxattr"); break;
        default: CALL(txvfs_removexattr, s, tx_arg(w, si), path_arg(k1), name); break;
        }
        break;
    }
    case 36: { Sentinel<txvfs_usage> u; rc = CALL(txvfs_statfs, s, tx_arg(w, si), &u.v); EXPECT_UNTOUCHED(rc, u, "txvfs_statfs"); break; }
    case 37: { // begin, commit, rollback, free
        auto &live = w.txs[si];
        int r = (int)pick(5);
        if (r == 0 || live.empty()) {
            Sentinel<txvfs_tx *> t;
            rc = CALL(txvfs_tx_begin, s, &t.v);
            EXPECT_UNTOUCHED(rc, t, "txvfs_tx_begin");
            if (rc == 0) live.push_back(t.v);
        } else {
            size_t i = pick(live.size());
            txvfs_tx *t = live[i];
            live[i] = live.back();
            live.pop_back();
            if (r == 1) CALL(txvfs_tx_commit, t), w.done[si].push_back(t);
            else if (r == 2) CALL(txvfs_tx_rollback, t), w.done[si].push_back(t);
            else txvfs_tx_free(t);
        }
        if (w.done[si].size() > 4) {
            txvfs_tx_free(w.done[si].front());
            w.done[si].erase(w.done[si].begin());
        }
        break;
    }
    case 38: { CallbackState st{&w, si, (int)pick(6)}; CALL(txvfs_transact, s, chance(5) ? nullptr : callback, &st); break; }
    default: { // odds and ends
        Sentinel<uint32_t> v;
        switch (pick(7)) {
        case 0: rc = CALL(txvfs_store_block_size, s, &v.v); EXPECT_UNTOUCHED(rc, v, "txvfs_store_block_size"); break;
        case 1: rc = CALL(txvfs_store_inline_limit, s, &v.v); EXPECT_UNTOUCHED(rc, v, "txvfs_store_inline_limit"); break;
        case 2: CALL(txvfs_store_sync, s); break;
        case 3: if (chance(20)) free_store_first(w, si); break;
        case 4: { // no SQLite transaction is open here: every token is unknown or bad
            Sentinel<txvfs_tx *> t;
            std::string token = chance(50) ? random_token() : random_path();
            rc = CALL(txvfs_tx_join, s, chance(5) ? nullptr : token.c_str(), chance(5) ? nullptr : &t.v);
            EXPECT_UNTOUCHED(rc, t, "txvfs_tx_join");
            if (rc == 0) die("txvfs_tx_join joined a token nobody published");
            break;
        }
        case 5: {
            std::string token = random_token();
            CALL(txvfs_tx_joined_commit_error, chance(5) ? nullptr : token.c_str());
            break;
        }
        default:
            if (txvfs_strerror((int)rng()) == nullptr || txvfs_version() == nullptr) die("NULL static string");
        }
    }
    }
}

} // namespace

int main(int argc, char **argv) {
    unsigned long long seed = (unsigned long long)std::chrono::steady_clock::now().time_since_epoch().count();
    long long ops = 20000;
    double seconds = 60;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
        else if (a == "--ops") ops = std::atoll(argv[i + 1]);
        else if (a == "--seconds") seconds = std::atof(argv[i + 1]);
    }
    rng.seed(seed);
    std::printf("fuzz_capi: seed %llu (rerun with --seed %llu)\n", seed, seed);
    std::fflush(stdout);
    auto start = std::chrono::steady_clock::now();

    World w;
    if (txvfs_options_new(&w.options) != 0) die("options_new");
    txvfs_options_set_inline_limit(w.options, 64);   // small files leave the inode early
    txvfs_options_set_block_size(w.options, 4096);   // and span several blocks
    for (auto &s : w.stores)
        if (txvfs_store_open("memory:", w.options, &s) != 0) die(std::string("open: ") + txvfs_last_error());

    long long done = 0;
    for (; done < ops; done++) {
        if (done % 1000 == 0 &&
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds)
            break;
        step(w, (int)pick(2));
    }
    for (int si = 0; si < 2; si++) {
        for (int fd : w.fds[si]) txvfs_close(w.stores[si], fd);
        for (auto *t : w.txs[si]) txvfs_tx_free(t);
        for (auto *t : w.done[si]) txvfs_tx_free(t);
        txvfs_store_free(w.stores[si]);
    }
    txvfs_options_free(w.options);
    std::printf("fuzz_capi: %lld steps, %lld calls, %lld failed with an error code:", done, calls, failures_seen);
    for (auto &[code, n] : codes) std::printf(" %s=%lld", txvfs_strerror(-code), n);
    std::printf("\nfuzz_capi: %lld stores freed before their descriptors and transactions\n", freed_first);
    std::printf("fuzz_capi: ok\n");
    return 0;
}
