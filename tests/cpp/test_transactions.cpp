// Explicit transactions, txvfs_transact, and conflicts between threads.
#include "support.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {
/** Both threads wait here until the other has arrived (a two-party barrier). */
class Barrier {
public:
    explicit Barrier(int n) : left_(n) {}
    void wait() {
        std::unique_lock<std::mutex> g(m_);
        if (--left_ == 0) cv_.notify_all();
        else cv_.wait(g, [&] { return left_ == 0; });
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    int left_;
};
} // namespace

TEST_CASE("tx: a multi-file transaction is invisible until commit, then whole", "[tx]") {
    Store s;
    txvfs_tx *tx = nullptr;
    OK(txvfs_tx_begin(s, &tx));
    OK(txvfs_mkdir(s, tx, "/docs", 0755));
    put(s, "/docs/a", "one", tx);
    put(s, "/docs/b", "two", tx);
    int fd = open_fd(s, "/docs/c", O_RDWR | O_CREAT, tx);
    size_t n;
    OK(txvfs_write(s, fd, "three", 5, &n));
    REQUIRE(get(s, "/docs/a", tx) == "one"); // reads see the transaction's own writes
    bool e = true;
    OK(txvfs_exists(s, nullptr, "/docs", &e));
    REQUIRE_FALSE(e); // nobody else sees anything
    OK(txvfs_tx_commit(tx));
    REQUIRE(txvfs_write(s, fd, "x", 1, &n) == -EBADF); // its descriptors end with it
    OK(txvfs_close(s, fd));
    txvfs_tx_free(tx);
    REQUIRE(get(s, "/docs/a") == "one");
    REQUIRE(get(s, "/docs/b") == "two");
    REQUIRE(get(s, "/docs/c") == "three");
}

TEST_CASE("tx: rollback and free discard everything", "[tx]") {
    Store s;
    txvfs_tx *tx = nullptr;
    OK(txvfs_tx_begin(s, &tx));
    put(s, "/a", "x", tx);
    OK(txvfs_tx_rollback(tx));
    txvfs_tx_free(tx);
    OK(txvfs_tx_begin(s, &tx));
    put(s, "/b", "x", tx);
    txvfs_tx_free(tx); // still open: rolled back
    bool e = true;
    OK(txvfs_exists(s, nullptr, "/a", &e));
    REQUIRE_FALSE(e);
    OK(txvfs_exists(s, nullptr, "/b", &e));
    REQUIRE_FALSE(e);
}

TEST_CASE("tx: two threads read then write the same file: the second commit conflicts", "[tx][threads]") {
    Store s;
    put(s, "/x", "0");
    Barrier read_done(2);
    int rc[2] = {1, 1};
    std::string seen[2];
    std::mutex order;
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; t++) {
        threads.emplace_back([&, t] {
            txvfs_tx *tx = nullptr;
            if (txvfs_tx_begin(s, &tx) != 0) return;
            seen[t] = get(s, "/x", tx);
            std::string v = std::to_string(t + 1);
            txvfs_write_file(s, tx, "/x", v.data(), v.size());
            read_done.wait(); // both have read before either commits
            {
                std::lock_guard<std::mutex> g(order); // commits one after the other
                rc[t] = txvfs_tx_commit(tx);
            }
            txvfs_tx_free(tx);
        });
    }
    for (auto &th : threads) th.join();
    REQUIRE(seen[0] == "0");
    REQUIRE(seen[1] == "0");
    REQUIRE(((rc[0] == 0 && rc[1] == -TXVFS_ECONFLICT) || (rc[1] == 0 && rc[0] == -TXVFS_ECONFLICT)));
    std::string winner = rc[0] == 0 ? "1" : "2";
    REQUIRE(get(s, "/x") == winner);
}

namespace {
struct Transfer {
    txvfs_store *s;
    int runs = 0;
};

/** Moves 1 from /a to /b: reads both, writes both, in the callback's transaction. */
int transfer(txvfs_tx *tx, void *userdata) {
    auto *t = static_cast<Transfer *>(userdata);
    t->runs++;
    std::string a = get(t->s, "/a", tx), b = get(t->s, "/b", tx);
    std::string na = std::to_string(std::stol(a) - 1), nb = std::to_string(std::stol(b) + 1);
    int rc = txvfs_write_file(t->s, tx, "/a", na.data(), na.size());
    if (rc < 0) return rc;
    return txvfs_write_file(t->s, tx, "/b", nb.data(), nb.size());
}
} // namespace

TEST_CASE("tx: txvfs_transact retries conflicts: no update is lost across 4 threads", "[tx][threads]") {
    Store s;
    put(s, "/a", "1000");
    put(s, "/b", "0");
    std::vector<std::thread> threads;
    std::atomic<int> failures{0}, runs{0};
    for (int t = 0; t < 4; t++) {
        threads.emplace_back([&] {
            Transfer tr{s};
            for (int i = 0; i < 25; i++)
                if (txvfs_transact(s, transfer, &tr) != 0) failures++;
            runs += tr.runs;
        });
    }
    for (auto &th : threads) th.join();
    REQUIRE(failures == 0);
    REQUIRE(get(s, "/a") == "900");
    REQUIRE(get(s, "/b") == "100");
    REQUIRE(runs >= 100); // each transfer ran at least once (more when it was retried)
}

namespace {
int abort_with_enoent(txvfs_tx *tx, void *userdata) {
    auto *s = static_cast<txvfs_store *>(userdata);
    put(s, "/partial", "x", tx);
    txvfs_attr a;
    return txvfs_stat(s, tx, "/missing", &a); // -ENOENT, message kept
}
int returns_positive(txvfs_tx *, void *) { return 5; }
int misuses_its_tx(txvfs_tx *tx, void *userdata) {
    int *codes = static_cast<int *>(userdata);
    codes[0] = txvfs_tx_commit(tx);
    codes[1] = txvfs_tx_rollback(tx);
    txvfs_tx_free(tx); // a no-op: txvfs_transact owns it
    return 0;
}
int always_conflicts(txvfs_tx *, void *userdata) {
    ++*static_cast<int *>(userdata);
    return -TXVFS_ECONFLICT;
}
} // namespace

TEST_CASE("tx: txvfs_transact passes the callback's code and message back, rolled back", "[tx]") {
    Store s;
    REQUIRE(txvfs_transact(s, abort_with_enoent, s.s) == -ENOENT);
    std::string msg = txvfs_last_error();
    REQUIRE(msg.find("/missing") != std::string::npos);
    bool e = true;
    OK(txvfs_exists(s, nullptr, "/partial", &e));
    REQUIRE_FALSE(e);
    REQUIRE(txvfs_transact(s, returns_positive, nullptr) == -EINVAL);
    int codes[2] = {1, 1};
    OK(txvfs_transact(s, misuses_its_tx, codes));
    REQUIRE(codes[0] == -EINVAL);
    REQUIRE(codes[1] == -EINVAL);
}

TEST_CASE("tx: txvfs_transact gives up after max_retries", "[tx]") {
    txvfs_options *o = nullptr;
    OK(txvfs_options_new(&o));
    OK(txvfs_options_set_max_retries(o, 2));
    Store s("memory:", o);
    txvfs_options_free(o);
    int runs = 0;
    REQUIRE(txvfs_transact(s, always_conflicts, &runs) == -TXVFS_ECONFLICT);
    REQUIRE(runs == 3); // the first run and two retries
}
