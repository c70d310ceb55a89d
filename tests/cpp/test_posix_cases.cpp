// The shared POSIX-semantics table tests/cases/posix.cases (format at its top), run through the
// C API: every case on a fresh memory: store (or, with TXVFS_POSIX_CASES_STORE set to a URI
// ending in a prefix, such as fdb:CLUSTER?prefix=cases, on that URI with the case's number and
// name appended: tests/foundationdb/run). All mismatches are reported together.
#include "support.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>
#include <sys/stat.h>
#include <vector>

namespace {

struct Step {
    int line;
    std::string op;
    std::vector<std::string> args;
    std::string expect;
};
struct Case {
    std::string name;
    std::vector<Step> steps;
};

std::vector<Case> parse(const std::string &file) {
    std::ifstream in(file);
    REQUIRE(in.good());
    std::vector<Case> cases;
    std::string raw;
    for (int line = 1; std::getline(in, raw); line++) {
        if (raw.find_first_not_of(" \t") == std::string::npos || raw[0] == '#') continue;
        if (raw.rfind("case ", 0) == 0) {
            cases.push_back(Case{raw.substr(5), {}});
            continue;
        }
        size_t arrow = raw.rfind(" => ");
        REQUIRE(arrow != std::string::npos);
        REQUIRE(!cases.empty());
        Step st{line, "", {}, raw.substr(arrow + 4)};
        std::istringstream fields(raw.substr(0, arrow));
        fields >> st.op;
        for (std::string f; std::getline(fields, f, ' ');)
            if (!f.empty()) st.args.push_back(f);
        cases.back().steps.push_back(st);
    }
    return cases;
}

/** Expands {N:UNIT}, then decodes `-` (empty), `\0` and `\\`. */
std::string decode(const std::string &s) {
    std::string expanded;
    size_t i = 0;
    while (i < s.size()) {
        size_t open = s.find('{', i);
        if (open == std::string::npos) break;
        size_t close = s.find('}', open);
        size_t colon = s.find(':', open);
        bool rep = close != std::string::npos && colon != std::string::npos && colon < close && colon > open + 1 &&
                   std::all_of(s.begin() + open + 1, s.begin() + colon, ::isdigit);
        if (!rep) {
            expanded += s.substr(i, open + 1 - i);
            i = open + 1;
            continue;
        }
        expanded += s.substr(i, open - i);
        long n = std::stol(s.substr(open + 1, colon - open - 1));
        std::string unit = s.substr(colon + 1, close - colon - 1);
        for (long k = 0; k < n; k++) expanded += unit;
        i = close + 1;
    }
    expanded += s.substr(i);
    if (expanded == "-") return "";
    std::string out;
    for (size_t k = 0; k < expanded.size(); k++) {
        if (expanded[k] == '\\' && k + 1 < expanded.size()) {
            char c = expanded[++k];
            out += c == '0' ? '\0' : c;
        } else {
            out += expanded[k];
        }
    }
    return out;
}

const std::map<std::string, int> errnos = {
    {"ENOENT", ENOENT}, {"EEXIST", EEXIST}, {"ENOTDIR", ENOTDIR}, {"EISDIR", EISDIR}, {"ENOTEMPTY", ENOTEMPTY},
    {"EINVAL", EINVAL}, {"ELOOP", ELOOP}, {"ENAMETOOLONG", ENAMETOOLONG}, {"EPERM", EPERM}, {"EACCES", EACCES},
    {"EBUSY", EBUSY}, {"ENODATA", ENODATA}, {"EBADF", EBADF}, {"EXDEV", EXDEV}, {"ENOSPC", ENOSPC},
    {"EROFS", EROFS}, {"ERANGE", ERANGE}, {"EFBIG", EFBIG}, {"E2BIG", E2BIG}, {"EAGAIN", EAGAIN},
    {"EDEADLK", EDEADLK},
};

/** A step's outcome: rc < 0 is an error; `value` is set for queries. */
struct Outcome {
    Outcome(int rc = 0, bool query = false, std::string value = {}) : rc(rc), query(query), value(std::move(value)) {}
    int rc;
    bool query;
    std::string value;
};

Outcome value(std::string v) { return Outcome{0, true, std::move(v)}; }

std::string joined(std::vector<std::string> names) {
    std::sort(names.begin(), names.end());
    std::string out;
    for (auto &n : names) out += (out.empty() ? "" : ",") + n;
    return out;
}

int write_via_fd(txvfs_store *s, const std::string &path, int flags, const std::string &data, long offset) {
    int fd = -1;
    size_t n;
    int rc = txvfs_open(s, nullptr, path.c_str(), flags, 0644, &fd);
    if (rc < 0) return rc;
    rc = offset < 0 ? txvfs_write(s, fd, data.data(), data.size(), &n)
                    : txvfs_pwrite(s, fd, data.data(), data.size(), (uint64_t)offset, &n);
    int rc2 = txvfs_close(s, fd);
    return rc < 0 ? rc : rc2;
}

Outcome run(txvfs_store *s, const std::string &op, const std::vector<std::string> &a) {
    auto arg = [&](size_t i) { return decode(a.at(i)); };
    auto mode = [&](size_t i) { return (uint32_t)std::stoul(a.at(i), nullptr, 8); };
    auto p = [&](size_t i) { return arg(i); };
    txvfs_attr st;
    if (op == "mkdir") return {txvfs_mkdir(s, nullptr, p(0).c_str(), mode(1))};
    if (op == "rmdir") return {txvfs_rmdir(s, nullptr, p(0).c_str())};
    if (op == "write") return {write_via_fd(s, p(0), O_WRONLY | O_CREAT | O_TRUNC, arg(1), -1)};
    if (op == "append") return {write_via_fd(s, p(0), O_WRONLY | O_CREAT | O_APPEND, arg(1), -1)};
    if (op == "pwrite") return {write_via_fd(s, p(0), O_WRONLY, arg(2), std::stol(a.at(1)))};
    if (op == "read") {
        int fd = -1;
        int rc = txvfs_open(s, nullptr, p(0).c_str(), O_RDONLY, 0, &fd);
        if (rc < 0) return {rc};
        std::string data, buf(65536, '\0');
        size_t n = 0;
        while ((rc = txvfs_read(s, fd, buf.data(), buf.size(), &n)) == 0 && n > 0) data.append(buf, 0, n);
        int rc2 = txvfs_close(s, fd);
        if (rc < 0 || rc2 < 0) return {rc < 0 ? rc : rc2};
        return value(data);
    }
    if (op == "size" || op == "nlink" || op == "mode") {
        int rc = txvfs_stat(s, nullptr, p(0).c_str(), &st);
        if (rc < 0) return {rc};
        if (op == "size") return value(std::to_string(st.size));
        if (op == "nlink") return value(std::to_string(st.nlink));
        std::ostringstream o;
        o << std::oct << (st.mode & 07777);
        return value(o.str());
    }
    if (op == "type") {
        int rc = txvfs_lstat(s, nullptr, p(0).c_str(), &st);
        if (rc < 0) return {rc};
        return value(S_ISDIR(st.mode) ? "dir" : S_ISLNK(st.mode) ? "symlink" : "file");
    }
    if (op == "unlink") return {txvfs_unlink(s, nullptr, p(0).c_str())};
    if (op == "rename") return {txvfs_rename(s, nullptr, p(0).c_str(), p(1).c_str(), 0)};
    if (op == "rename_noreplace") return {txvfs_rename(s, nullptr, p(0).c_str(), p(1).c_str(), TXVFS_RENAME_NOREPLACE)};
    if (op == "rename_exchange") return {txvfs_rename(s, nullptr, p(0).c_str(), p(1).c_str(), TXVFS_RENAME_EXCHANGE)};
    if (op == "link") return {txvfs_link(s, nullptr, p(0).c_str(), p(1).c_str())};
    if (op == "symlink") return {txvfs_symlink(s, nullptr, arg(0).c_str(), p(1).c_str())};
    if (op == "readlink") {
        size_t n = 0;
        int rc = txvfs_readlink(s, nullptr, p(0).c_str(), nullptr, 0, &n);
        if (rc < 0) return {rc};
        std::string buf(n + 1, '\0');
        rc = txvfs_readlink(s, nullptr, p(0).c_str(), buf.data(), buf.size(), &n);
        if (rc < 0) return {rc};
        return value(buf.substr(0, n));
    }
    if (op == "truncate") return {txvfs_truncate(s, nullptr, p(0).c_str(), std::stoull(a.at(1)))};
    if (op == "create_excl" || op == "open_read" || op == "open_write") {
        int flags = op == "create_excl" ? O_WRONLY | O_CREAT | O_EXCL : op == "open_read" ? O_RDONLY : O_WRONLY;
        int fd = -1;
        int rc = txvfs_open(s, nullptr, p(0).c_str(), flags, 0644, &fd);
        if (rc < 0) return {rc};
        return {txvfs_close(s, fd)};
    }
    if (op == "chmod") return {txvfs_chmod(s, nullptr, p(0).c_str(), mode(1))};
    if (op == "setxattr" || op == "setxattr_create" || op == "setxattr_replace") {
        int flags = op == "setxattr" ? 0 : op == "setxattr_create" ? TXVFS_XATTR_CREATE : TXVFS_XATTR_REPLACE;
        std::string v = arg(2);
        return {txvfs_setxattr(s, nullptr, p(0).c_str(), arg(1).c_str(), v.data(), v.size(), flags)};
    }
    if (op == "getxattr" || op == "listxattr") {
        std::string path = p(0), name = op == "getxattr" ? arg(1) : "";
        auto call = [&](void *buf, size_t cap, size_t *n) {
            return op == "getxattr" ? txvfs_getxattr(s, nullptr, path.c_str(), name.c_str(), buf, cap, n)
                                    : txvfs_listxattr(s, nullptr, path.c_str(), static_cast<char *>(buf), cap, n);
        };
        size_t n = 0;
        int rc = call(nullptr, 0, &n);
        if (rc < 0) return {rc};
        std::string buf(n, '\0');
        rc = call(buf.data(), buf.size(), &n);
        if (rc < 0) return {rc};
        buf.resize(n);
        if (op == "getxattr") return value(buf);
        std::vector<std::string> names;
        std::istringstream in(buf);
        for (std::string nm; std::getline(in, nm, '\0');) names.push_back(nm);
        return value(joined(names));
    }
    if (op == "removexattr") return {txvfs_removexattr(s, nullptr, p(0).c_str(), arg(1).c_str())};
    if (op == "ls") {
        std::vector<std::string> names;
        std::vector<txvfs_dirent> page(7); // small pages: exercises the cursor
        std::string after;
        for (;;) {
            size_t n = 0;
            int rc = txvfs_readdir(s, nullptr, p(0).c_str(), names.empty() ? nullptr : after.c_str(), page.data(),
                                   page.size(), &n);
            if (rc < 0) return {rc};
            for (size_t i = 0; i < n; i++) names.emplace_back(page[i].name, page[i].name_len);
            if (n < page.size()) break;
            after = names.back();
        }
        return value(joined(names));
    }
    if (op == "exists") {
        bool e = false;
        int rc = txvfs_exists(s, nullptr, p(0).c_str(), &e);
        if (rc < 0) return {rc};
        return value(e ? "true" : "false");
    }
    FAIL("unknown op " << op);
    return {};
}

std::string describe(const Outcome &o) {
    if (o.rc < 0) {
        for (auto &[name, code] : errnos)
            if (-o.rc == code) return name + " (" + txvfs_last_error() + ")";
        return "error " + std::to_string(o.rc) + " (" + txvfs_last_error() + ")";
    }
    if (!o.query) return "ok";
    return o.value.size() > 200 ? o.value.substr(0, 200) + "..." : o.value;
}

bool matches(const std::string &expect, const Outcome &o) {
    auto e = errnos.find(expect);
    if (e != errnos.end()) return o.rc == -e->second;
    if (expect == "ok") return o.rc == 0 && !o.query;
    return o.rc == 0 && o.query && o.value == decode(expect);
}

/** The store of case number `n`: memory:, or TXVFS_POSIX_CASES_STORE-N-NAME. */
std::string case_store(size_t n, const std::string &name) {
    const char *base = std::getenv("TXVFS_POSIX_CASES_STORE");
    if (base == nullptr || *base == 0) return "memory:";
    std::string uri = std::string(base) + "-" + std::to_string(n) + "-";
    for (char ch : name) uri += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '-';
    return uri;
}

} // namespace

TEST_CASE("posix.cases: the shared semantics table through the C API", "[posix]") {
    auto cases = parse(TXVFS_CASES_FILE);
    REQUIRE(cases.size() >= 60);
    std::vector<std::string> failures;
    size_t steps = 0;
    for (size_t n = 0; n < cases.size(); n++) {
        auto &c = cases[n];
        Store s(case_store(n, c.name));
        for (auto &st : c.steps) {
            steps++;
            // Paths containing NUL cannot pass through a C string; the table has none.
            Outcome o = run(s, st.op, st.args);
            if (!matches(st.expect, o))
                failures.push_back(c.name + " (line " + std::to_string(st.line) + "): " + st.op + " => expected " +
                                   st.expect + ", got " + describe(o));
        }
    }
    std::string report;
    for (auto &f : failures) report += "  " + f + "\n";
    INFO(cases.size() << " cases, " << steps << " steps, " << failures.size() << " failures:\n" << report);
    REQUIRE(failures.empty());
    WARN("posix.cases: " << cases.size() << " cases, " << steps << " steps through the C API");
}
