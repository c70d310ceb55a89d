# Installs txvfs for C, C++, SQLite and shell users under PREFIX (GNU conventions: PREFIX, DESTDIR):
#   make install PREFIX=$HOME/.local          # or sudo make install (PREFIX=/usr/local)
#   make uninstall PREFIX=$HOME/.local
# Why make and not CMake: cargo does the building (in the one shared target directory of
# scripts/env.sh, release profile, so RocksDB is not compiled again); what is left is copying
# files, which needs no configure step. C++ users still get a CMake package (find_package(txvfs)).
#
# PREFIX/include/txvfs.h, txvfs.hpp             C API and header-only C++17 wrapper
# PREFIX/include/txvfs_sqlite.hpp               C++: SQLite rows and files in one commit (sqlite3.h)
# PREFIX/lib/libtxvfs.so.VERSION (+ .so.MAJOR, .so symlinks; SONAME libtxvfs.so.MAJOR), libtxvfs.a
# PREFIX/lib/pkgconfig/txvfs.pc                 no build-tree paths, no rpath
# PREFIX/lib/cmake/txvfs/                       find_package(txvfs): txvfs::txvfs, txvfs::txvfs_static
# PREFIX/lib/libtxvfs_sqlite.so                 the SQLite VFS (loadable extension, or link it)
# PREFIX/bin/txvfs                              the command-line tool
# PREFIX/share/man/man1/txvfs*.1, PREFIX/share/{bash-completion,zsh,fish}/...   its docs and completions
PREFIX ?= /usr/local
DESTDIR ?=
CARGO ?= cargo

VERSION := $(shell sed -n 's/^\#define TXVFS_VERSION "\(.*\)"$$/\1/p' capi/include/txvfs.h)
MAJOR := $(word 1,$(subst ., ,$(VERSION)))
MINOR := $(word 2,$(subst ., ,$(VERSION)))
TARGET_DIR := $(shell . ./scripts/env.sh; echo "$$CARGO_TARGET_DIR")
ifeq ($(TARGET_DIR),)
$(error scripts/env.sh gave no CARGO_TARGET_DIR)
endif
OUT := $(TARGET_DIR)/release
ASSETS := $(TARGET_DIR)/cli-assets
D := $(DESTDIR)$(PREFIX)

all: build

# One cargo invocation (release, the workspace's one feature set), then the CLI's generated files.
build:
	scripts/first-build -p txvfs-capi -p txvfs-sqlite -p txvfs-cli
	. ./scripts/env.sh; $(CARGO) build --release -p txvfs-capi -p txvfs-sqlite -p txvfs-cli
	. ./scripts/env.sh; $(CARGO) run --quiet --release -p txvfs-cli --example gen_assets -- "$(ASSETS)" >/dev/null

install: install-c install-sqlite install-cli

install-c: build
	install -d "$(D)/include" "$(D)/lib/pkgconfig" "$(D)/lib/cmake/txvfs"
	install -m 644 capi/include/txvfs.h capi/include/txvfs.hpp capi/include/txvfs_sqlite.hpp "$(D)/include/"
	install -m 755 "$(OUT)/libtxvfs.so" "$(D)/lib/libtxvfs.so.$(VERSION)"
	ln -sf "libtxvfs.so.$(VERSION)" "$(D)/lib/libtxvfs.so.$(MAJOR)"
	ln -sf "libtxvfs.so.$(MAJOR)" "$(D)/lib/libtxvfs.so"
	install -m 644 "$(OUT)/libtxvfs.a" "$(D)/lib/libtxvfs.a"
	capi/write-pc.sh --prefix "$(PREFIX)" "$(D)/lib/pkgconfig" >/dev/null
	install -m 644 capi/cmake/txvfsConfig.cmake "$(D)/lib/cmake/txvfs/"
	sed -e 's/@VERSION@/$(VERSION)/' -e 's/@MAJOR@/$(MAJOR)/' -e 's/@MINOR@/$(MINOR)/' \
	  capi/cmake/txvfsConfigVersion.cmake.in >"$(D)/lib/cmake/txvfs/txvfsConfigVersion.cmake"

# Beside libtxvfs: `.load PREFIX/lib/libtxvfs_sqlite`, or link with -ltxvfs_sqlite.
install-sqlite: build
	install -d "$(D)/lib"
	install -m 755 "$(OUT)/libtxvfs_sqlite.so" "$(D)/lib/libtxvfs_sqlite.so"

install-cli: build
	install -d "$(D)/bin" "$(D)/share/man/man1" "$(D)/share/bash-completion/completions" \
	  "$(D)/share/zsh/site-functions" "$(D)/share/fish/vendor_completions.d"
	install -m 755 "$(OUT)/txvfs" "$(D)/bin/txvfs"
	install -m 644 "$(ASSETS)"/man/*.1 "$(D)/share/man/man1/"
	install -m 644 "$(ASSETS)/completions/txvfs.bash" "$(D)/share/bash-completion/completions/txvfs"
	install -m 644 "$(ASSETS)/completions/_txvfs" "$(D)/share/zsh/site-functions/_txvfs"
	install -m 644 "$(ASSETS)/completions/txvfs.fish" "$(D)/share/fish/vendor_completions.d/txvfs.fish"

uninstall:
	rm -f "$(D)/include/txvfs.h" "$(D)/include/txvfs.hpp" "$(D)/include/txvfs_sqlite.hpp" \
	  "$(D)/lib/libtxvfs.so" \
	  "$(D)/lib/libtxvfs.so.$(MAJOR)" "$(D)/lib/libtxvfs.so.$(VERSION)" "$(D)/lib/libtxvfs.a" \
	  "$(D)/lib/pkgconfig/txvfs.pc" "$(D)/lib/libtxvfs_sqlite.so" "$(D)/bin/txvfs" \
	  "$(D)"/share/man/man1/txvfs.1 "$(D)"/share/man/man1/txvfs-*.1 \
	  "$(D)/share/bash-completion/completions/txvfs" "$(D)/share/zsh/site-functions/_txvfs" \
	  "$(D)/share/fish/vendor_completions.d/txvfs.fish"
	rm -rf "$(D)/lib/cmake/txvfs"

.PHONY: all build install install-c install-sqlite install-cli uninstall
