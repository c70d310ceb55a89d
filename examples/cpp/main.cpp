// txvfs from C++: a multi-file transaction with txvfs::transact, reading back, errors as
// exceptions. Build as an outside project: cmake -S examples/cpp -B build && cmake --build build
// (finds txvfs through pkg-config). Run: ./build/example [store-uri]   (default "memory:")
#include <txvfs.hpp>

#include <cerrno>
#include <iostream>

int main(int argc, char **argv) {
    txvfs::store store = txvfs::store::open(argc > 1 ? argv[1] : "memory:");

    // Both files appear together or not at all; retried if another writer conflicts.
    int written = txvfs::transact(store, [](txvfs::transaction &tx) {
        tx.mkdir_all("/docs");
        tx.write_file("/docs/a.txt", "part one");
        tx.write_file("/docs/b.txt", "part two");
        return 2;
    });
    std::cout << "committed " << written << " files\n";
    std::cout << "b.txt: " << store.read_file("/docs/b.txt") << "\n";

    {
        txvfs::file f = store.open("/docs/a.txt", O_RDWR | O_APPEND);
        f.write(std::string_view(" and more"));
        f.seek(0);
        std::cout << "a.txt: " << f.read_all() << "\n";
    } // closed here

    try {
        store.stat("/docs/missing.txt");
    } catch (const txvfs::error &e) {
        std::cout << "missing.txt: " << e.what() << (e.code() == -ENOENT ? " (ENOENT)" : "") << "\n";
    }

    try {
        txvfs::transact(store, [](txvfs::transaction &tx) {
            tx.write_file("/docs/c.txt", "never visible");
            throw std::runtime_error("changed my mind");
        });
    } catch (const std::runtime_error &e) {
        std::cout << "rolled back: " << e.what() << ", c.txt exists: " << std::boolalpha
                  << store.exists("/docs/c.txt") << "\n";
    }
    std::cout << "done\n";
}
