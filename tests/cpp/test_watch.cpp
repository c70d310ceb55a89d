// The change feed through the C ABI: changes handed out one at a time in commit order,
// filters, waiting with a timeout, resuming from a saved cursor, and bad input (issue 31).
#include "support.hpp"

#include <txvfs.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using Seen = std::vector<std::pair<uint32_t, std::string>>;

/** Every change the watcher has now (non-blocking). */
Seen drain(txvfs_watcher *w) {
    Seen out;
    for (;;) {
        txvfs_change c{};
        int has = -1;
        OK(txvfs_watch_poll(w, &c, &has));
        if (!has) return out;
        REQUIRE(c.path[c.path_len] == '\0');
        std::string p(c.path, c.path_len);
        if (c.kind == TXVFS_CHANGE_RENAMED) {
            REQUIRE(c.to != nullptr);
            p += " -> " + std::string(c.to, c.to_len);
        } else {
            REQUIRE(c.to == nullptr);
        }
        out.emplace_back(c.kind, p);
    }
}

std::string cursor(txvfs_watcher *w) {
    size_t n = 0;
    OK(txvfs_watch_cursor(w, nullptr, 0, &n));
    std::string s(n + 1, '\0');
    OK(txvfs_watch_cursor(w, s.data(), s.size(), &n));
    s.resize(n);
    return s;
}

} // namespace

TEST_CASE("watch: every change once, in commit order, resumable from a cursor", "[watch]") {
    Store s;
    OK(txvfs_set_change_feed(s, 1));
    txvfs_watcher *w = nullptr;
    OK(txvfs_watch_open(s, nullptr, 0, nullptr, &w));
    REQUIRE(drain(w).empty());
    std::string start = cursor(w);
    REQUIRE(start.size() + 1 == TXVFS_CURSOR_MAX);
    OK(txvfs_mkdir(s, nullptr, "/d", 0755));
    put(s, "/d/a", "one");
    OK(txvfs_rename(s, nullptr, "/d/a", "/b", 0));
    OK(txvfs_unlink(s, nullptr, "/b"));
    Seen want = {{TXVFS_CHANGE_CREATED, "/d"},
                 {TXVFS_CHANGE_CREATED, "/d/a"},
                 {TXVFS_CHANGE_RENAMED, "/d/a -> /b"},
                 {TXVFS_CHANGE_REMOVED, "/b"}};
    REQUIRE(drain(w) == want);
    std::string end = cursor(w);
    REQUIRE(end > start);
    txvfs_watch_free(w);

    // Resuming from the first cursor gives the same changes again; from the last, none.
    OK(txvfs_watch_open(s, nullptr, 0, start.c_str(), &w));
    REQUIRE(drain(w) == want);
    txvfs_watch_free(w);
    OK(txvfs_watch_open(s, nullptr, 0, end.c_str(), &w));
    REQUIRE(drain(w).empty());
    REQUIRE(cursor(w) == end);

    // One transaction: its changes come together, the last one marked.
    txvfs_tx *tx = nullptr;
    OK(txvfs_tx_begin(s, &tx));
    put(s, "/x", "1", tx);
    put(s, "/y", "2", tx);
    OK(txvfs_tx_commit(tx));
    txvfs_tx_free(tx);
    std::vector<int> last;
    for (;;) {
        txvfs_change c{};
        int has = 0;
        OK(txvfs_watch_poll(w, &c, &has));
        if (!has) break;
        last.push_back(c.last_in_transaction);
        // The cursor moves past the transaction only once all of it was handed out.
        REQUIRE((cursor(w) == end) == !c.last_in_transaction);
    }
    REQUIRE(last == std::vector<int>{0, 1});
    txvfs_watch_free(w);
    txvfs_watch_free(nullptr);
}

TEST_CASE("watch: prefix and kind filters, waiting with a timeout", "[watch]") {
    Store s;
    OK(txvfs_set_change_feed(s, 1));
    txvfs_watcher *w = nullptr;
    OK(txvfs_watch_open(s, "/keep", TXVFS_CHANGE_CREATED | TXVFS_CHANGE_REMOVED, nullptr, &w));
    txvfs_change c{};
    int has = -1;
    auto t0 = std::chrono::steady_clock::now();
    OK(txvfs_watch_wait(w, 50, &c, &has));
    REQUIRE(has == 0);
    REQUIRE(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(45));
    std::thread writer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        put(s, "/other", "x");
        OK(txvfs_mkdir(s, nullptr, "/keep", 0755));
    });
    OK(txvfs_watch_wait(w, 10000, &c, &has));
    writer.join();
    REQUIRE(has == 1);
    REQUIRE(c.kind == TXVFS_CHANGE_CREATED);
    REQUIRE(c.type == TXVFS_DT_DIR);
    REQUIRE(std::string(c.path) == "/keep");
    REQUIRE(c.time_ms > 0);
    put(s, "/keep/f", "data");
    put(s, "/keep/f", "more"); // written: filtered out by kind
    OK(txvfs_unlink(s, nullptr, "/keep/f"));
    REQUIRE(drain(w) == Seen{{TXVFS_CHANGE_CREATED, "/keep/f"}, {TXVFS_CHANGE_REMOVED, "/keep/f"}});
    txvfs_watch_free(w);
}

TEST_CASE("watch: bad input gives clear errors", "[watch][bad-input]") {
    Store s;
    txvfs_watcher *w = nullptr;
    REQUIRE(txvfs_watch_open(s, nullptr, 0, nullptr, &w) == -EINVAL); // the feed is off
    REQUIRE(std::string(txvfs_last_error()).find("off") != std::string::npos);
    REQUIRE(txvfs_set_change_feed(nullptr, 1) == -EINVAL);
    OK(txvfs_set_change_feed(s, 1));
    REQUIRE(txvfs_watch_open(nullptr, nullptr, 0, nullptr, &w) == -EINVAL);
    REQUIRE(txvfs_watch_open(s, nullptr, 0, nullptr, nullptr) == -EINVAL);
    REQUIRE(txvfs_watch_open(s, nullptr, 0x80, nullptr, &w) == -EINVAL);
    REQUIRE(txvfs_watch_open(s, nullptr, 0, "garbage", &w) == -EINVAL);
    REQUIRE(std::string(txvfs_last_error()).find("not a change feed cursor") != std::string::npos);
    REQUIRE(w == nullptr);
    // A cursor of another store, and one from the future.
    Store other;
    OK(txvfs_set_change_feed(other, 1));
    txvfs_watcher *ow = nullptr;
    OK(txvfs_watch_open(other, nullptr, 0, nullptr, &ow));
    std::string theirs = cursor(ow);
    txvfs_watch_free(ow);
    REQUIRE(txvfs_watch_open(s, nullptr, 0, theirs.c_str(), &w) == -EINVAL);
    REQUIRE(std::string(txvfs_last_error()).find("another store") != std::string::npos);
    OK(txvfs_watch_open(s, nullptr, 0, nullptr, &w));
    std::string future = cursor(w);
    future.replace(future.size() - 6, 6, "ffffff");
    txvfs_watcher *fw = nullptr;
    REQUIRE(txvfs_watch_open(s, nullptr, 0, future.c_str(), &fw) == -EINVAL);
    REQUIRE(std::string(txvfs_last_error()).find("future") != std::string::npos);
    REQUIRE(fw == nullptr);
    txvfs_change c{};
    int has = 0;
    REQUIRE(txvfs_watch_poll(nullptr, &c, &has) == -EINVAL);
    REQUIRE(txvfs_watch_poll(w, nullptr, &has) == -EINVAL);
    REQUIRE(txvfs_watch_wait(w, 0, &c, nullptr) == -EINVAL);
    size_t n = 0;
    char small[8];
    REQUIRE(txvfs_watch_cursor(w, small, sizeof small, &n) == -ERANGE);
    REQUIRE(txvfs_watch_cursor(w, small, sizeof small, nullptr) == -EINVAL);
    REQUIRE(txvfs_watch_cursor(nullptr, small, sizeof small, &n) == -EINVAL);
    txvfs_watch_free(w);
}

TEST_CASE("watch: the C++ wrapper", "[watch][wrapper]") {
    txvfs::store s = txvfs::store::open("memory:");
    s.set_change_feed(true);
    txvfs::watcher w(s, "/d");
    std::string start = w.cursor();
    s.mkdir("/d", 0755);
    s.rename("/d", "/e");
    auto c = w.wait(std::chrono::seconds(5));
    REQUIRE(c);
    REQUIRE(c->kind == TXVFS_CHANGE_CREATED);
    REQUIRE(c->path == "/d");
    REQUIRE(c->last_in_transaction);
    c = w.poll();
    REQUIRE(c);
    REQUIRE(c->kind == TXVFS_CHANGE_RENAMED);
    REQUIRE(c->to == std::optional<std::string>("/e"));
    REQUIRE(!w.poll());
    REQUIRE(!w.wait(std::chrono::milliseconds(1)));
    txvfs::watcher again(s, "", TXVFS_CHANGE_RENAMED, start);
    REQUIRE(again.poll()->path == "/d");
    try {
        txvfs::watcher bad(s, "", 0, std::string_view("nope"));
        FAIL("a bad cursor was accepted");
    } catch (const txvfs::error &e) {
        REQUIRE(e.code() == -EINVAL);
    }
}
