"""The code blocks of README.md and the book (docs/), and the generated API pages.

    blocks.py list                 every fenced block: file:line, language, attributes
    blocks.py check                every block has a language this file knows, and
                                   core/src/lib.rs's doctest module lists every chapter
    blocks.py run LANG...          runs the blocks of these languages (sh python c cpp sql)
    blocks.py api [--check]        writes docs/api/c.md and docs/api/python.md (--check: fails
                                   if the files differ from what would be written)

A fence's info string is the language, then attributes separated by spaces:
- no_run: shown only, never run (a command that needs a cluster, root, or a long build);
- needs_fuse: run only where /dev/fuse and fusermount3 exist (else counted as skipped);
- a block followed by a ```text output block must print that text (line by line; a `*` in
  an expected line stands for any text, such as a temporary path).
Rust blocks are doc tests: core/src/lib.rs includes every chapter in a #[cfg(doctest)] module
and rustdoc compiles and runs them with its own attributes (no_run: compiled only; ignore).
A C or C++ block without a main() runs inside one that opened `store` on a fresh RocksDB store
in the working directory (C: `txvfs_store *store` and a CHECK macro that returns on a negative
result; C++: `txvfs::store store`); one that includes sqlite3.h or txvfs_sqlite.hpp also links
-lsqlite3. sh blocks run with bash -e in a fresh directory with the
txvfs CLI on PATH; sql blocks through the sqlite3 shell with the txvfs extension loaded.

Environment (set by tests/docs/run): TXVFS_BIN (the cargo release directory, with txvfs and
libtxvfs_sqlite.so), TXVFS_LIB (a directory with libtxvfs.so and its SONAME libtxvfs.so.0),
PYTHONPATH (the txvfs package).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNERS = ("sh", "python", "c", "cpp", "sql")
DOCTESTS = ("rust",)
SHOWN = ("text",)  # plain text, never run
FENCE = re.compile(r"^```([\w+-]*)(.*)$")
TIMEOUT = 120


@dataclass
class Block:
    path: Path
    line: int
    lang: str
    attrs: list[str]
    code: str
    output: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def markdown_files() -> list[Path]:
    return [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def blocks_of(path: Path) -> list[Block]:
    out: list[Block] = []
    lines = path.read_text().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and lines[j] != "```":
            j += 1
        block = Block(
            path, start + 1, m.group(1), m.group(2).split(), "\n".join(lines[i + 1 : j]) + "\n"
        )
        # An output block right after it (blank lines between are allowed).
        k = j + 1
        while k < len(lines) and not lines[k].strip():
            k += 1
        if k < len(lines) and FENCE.match(lines[k]) and lines[k].split()[1:] == ["output"]:
            e = k + 1
            while e < len(lines) and lines[e] != "```":
                e += 1
            block.output = "\n".join(lines[k + 1 : e]) + "\n"
            out.append(block)
            i = e + 1
            continue
        out.append(block)
        i = j + 1
    return out


README_MAX_LINES = 300


def all_blocks() -> list[Block]:
    return [b for p in markdown_files() for b in blocks_of(p)]


def check() -> int:
    errors = []
    for b in all_blocks():
        if not b.lang:
            errors.append(f"{b.where}: a fence without a language (rustdoc would run it as Rust)")
        elif b.lang not in RUNNERS + DOCTESTS + SHOWN and "no_run" not in b.attrs:
            errors.append(f"{b.where}: no runner for '{b.lang}': mark it no_run")
    lib = (ROOT / "core" / "src" / "lib.rs").read_text()
    for p in markdown_files():
        rel = os.path.relpath(p, ROOT / "core" / "src")
        if f'include_str!("{rel}")' not in lib:
            errors.append(f"core/src/lib.rs: the doctest module `book` does not include {rel}")
    # The README is the front page: the long tables and measurements live in the book.
    n = len((ROOT / "README.md").read_text().splitlines())
    if n >= README_MAX_LINES:
        errors.append(
            f"README.md: {n} lines, keep it under {README_MAX_LINES} (move detail to docs/)"
        )
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


C_PRELUDE = """#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <txvfs.h>

#define CHECK(call)                                                                    \\
    do {                                                                               \\
        int rc_ = (call);                                                              \\
        if (rc_ < 0) {                                                                 \\
            fprintf(stderr, "%s failed: %s (%s)\\n", #call, txvfs_last_error(),         \\
                    txvfs_strerror(rc_));                                              \\
            return 1;                                                                  \\
        }                                                                              \\
    } while (0)

int main(void) {
    txvfs_store *store;
    CHECK(txvfs_store_open("rocksdb:store", NULL, &store));
"""
C_EPILOGUE = """    txvfs_store_free(store);
    return 0;
}
"""
CPP_PRELUDE = """#include <txvfs.hpp>

#include <cassert>
#include <cerrno>
#include <iostream>
#include <string>

int main() {
    txvfs::store store = txvfs::store::open("rocksdb:store");
"""
CPP_EPILOGUE = """    return 0;
}
"""


def indent(code: str) -> str:
    return "".join("    " + line if line.strip() else line for line in code.splitlines(True))


def command_for(b: Block, work: Path) -> list[str]:
    binary = Path(os.environ.get("TXVFS_BIN", ROOT / "target" / "release"))
    include = ROOT / "capi" / "include"
    lib = Path(os.environ.get("TXVFS_LIB", binary))  # libtxvfs.so and its SONAME, libtxvfs.so.0
    if b.lang == "sh":
        (work / "block.sh").write_text(b.code)
        return ["bash", "-eo", "pipefail", "block.sh"]
    if b.lang == "python":
        (work / "block.py").write_text(b.code)
        return [sys.executable, "block.py"]
    if b.lang in ("c", "cpp"):
        c = b.lang == "c"
        code = (
            b.code
            if "main(" in b.code
            else (
                (C_PRELUDE if c else CPP_PRELUDE)
                + indent(b.code)
                + (C_EPILOGUE if c else CPP_EPILOGUE)
            )
        )
        src = work / ("block.c" if c else "block.cpp")
        src.write_text(code)
        compiler = ["cc", "-std=c11"] if c else ["c++", "-std=c++17"]
        build = compiler + ["-Wall", "-Werror", f"-I{include}", str(src), f"-L{lib}", "-ltxvfs"]
        if re.search(r"#include [<\"](sqlite3\.h|txvfs_sqlite\.hpp)", code):
            build.append("-lsqlite3")  # rows and files in one commit (docs/sqlite.md)
        build += [f"-Wl,-rpath,{lib}", "-o", str(work / "block")]
        subprocess.run(build, check=True, cwd=work, timeout=TIMEOUT)
        return [str(work / "block")]
    if b.lang == "sql":
        (work / "block.sql").write_text(b.code)
        return [
            "sh",
            "-c",
            f"sqlite3 -bail -cmd '.load {binary}/libtxvfs_sqlite' :memory: <block.sql",
        ]
    raise ValueError(b.lang)


def matches(got: str, want: str) -> bool:
    """Line by line; a `*` in an expected line stands for any text (a temporary path)."""
    g, w = got.split("\n"), want.split("\n")
    pats = [re.compile(".*".join(re.escape(part) for part in line.split("*"))) for line in w]
    return len(g) == len(w) and all(p.fullmatch(a) for p, a in zip(pats, g, strict=True))


def unmount_under(work: Path) -> None:
    """Detaches whatever a FUSE block left mounted under its directory."""
    with open("/proc/self/mounts") as f:
        mounts = [line.split()[1] for line in f]
    for m in mounts:
        if m.startswith(str(work) + "/"):
            print(f"docs: {m} was still mounted: fusermount3 -u -z")
            subprocess.run(["fusermount3", "-u", "-z", m], check=False)


def fuse_here() -> bool:
    return os.path.exists("/dev/fuse") and shutil.which("fusermount3") is not None


def run(langs: list[str]) -> int:
    binary = Path(os.environ.get("TXVFS_BIN", ROOT / "target" / "release"))
    env = dict(os.environ, PATH=f"{binary}:{os.environ['PATH']}")
    passed = failed = skipped = 0
    for b in all_blocks():
        if b.lang not in langs:
            continue
        if "no_run" in b.attrs:
            skipped += 1
            continue
        if "needs_fuse" in b.attrs and not fuse_here():
            print(f"docs: {b.where}: SKIPPED: no FUSE here")
            skipped += 1
            continue
        with tempfile.TemporaryDirectory(prefix="txvfs-docs-") as tmp:
            work = Path(tmp)
            try:
                cmd = command_for(b, work)
                r = subprocess.run(
                    cmd, cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT
                )
            except (subprocess.SubprocessError, OSError) as e:
                print(f"docs: {b.where} ({b.lang}): FAILED to build or run: {e}")
                failed += 1
                continue
            if "needs_fuse" in b.attrs:
                unmount_under(work)
            ok = r.returncode == 0 and (b.output is None or matches(r.stdout, b.output))
            if ok:
                passed += 1
                continue
            failed += 1
            print(f"docs: {b.where} ({b.lang}): FAILED (exit {r.returncode})")
            print(b.code, end="")
            print(f"--- stdout\n{r.stdout}--- stderr\n{r.stderr}", end="")
            if b.output is not None and not matches(r.stdout, b.output):
                print(f"--- expected stdout\n{b.output}", end="")
    print(f"docs blocks ({' '.join(langs)}): {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


# ---- generated API pages ----------------------------------------------------------------

C_DECL = re.compile(r"/\*\*(.*?)\*/\s*\n([^/]*?;)", re.S)


def c_comment(text: str) -> str:
    lines = [re.sub(r"^\s*\* ?", "", line) for line in text.strip("\n").split("\n")]
    return "\n".join(lines).strip()


def c_api() -> str:
    header = (ROOT / "capi" / "include" / "txvfs.h").read_text()
    functions, types, constants = [], [], []
    for m in C_DECL.finditer(header):
        doc, decl = c_comment(m.group(1)), " ".join(m.group(2).split())
        if decl.startswith("#define"):
            continue
        name = re.search(r"(\w+)\s*\(", decl)
        if decl.startswith("typedef") or decl.startswith("struct") or decl.startswith("enum"):
            types.append((decl, doc))
        elif name:
            functions.append((name.group(1), decl, doc))
    for m in re.finditer(r"/\*\*(.*?)\*/\s*\n#define (\w+) (.*)", header):
        constants.append((m.group(2), m.group(3).strip(), c_comment(m.group(1))))
    out = [
        "# C API reference",
        "",
        "Generated from `capi/include/txvfs.h` by `tests/docs/blocks.py api` (the tests fail when",
        "it is stale). The header itself is generated by cbindgen from the Rust doc comments in",
        "`capi/src`. Every fallible function returns 0 or a negative errno (`-ENOENT`, ...) or",
        "`-TXVFS_E...` code; each entry says who owns what and which errors it gives. See",
        "[C and C++](../c-cpp.md) for the conventions and examples.",
        "",
        "## Functions",
        "",
    ]
    for name, decl, doc in functions:
        out += [f"### `{name}`", "", "```c no_run", decl, "```", "", doc, ""]
    out += ["## Types", ""]
    for decl, doc in types:
        out += ["```c no_run", decl, "```", "", doc, ""]
    out += ["## Constants", "", "| name | value | meaning |", "|---|---|---|"]
    for name, value, doc in constants:
        out.append(f"| `{name}` | `{value}` | {' '.join(doc.split())} |")
    return "\n".join(out).rstrip() + "\n"


def py_signature(node: ast.FunctionDef) -> str:
    text = ast.unparse(node.args)
    ret = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"{node.name}({text}){ret}"


def py_members(body: list[ast.stmt], level: int, prefix: str) -> list[str]:
    out: list[str] = []
    for node in body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            bases = ", ".join(ast.unparse(b) for b in node.bases)
            out += [
                f"{'#' * level} class `{prefix}{node.name}`" + (f"({bases})" if bases else ""),
                "",
            ]
            doc = ast.get_docstring(node)
            if doc:
                out += [doc, ""]
            out += py_members(node.body, level + 1, f"{prefix}{node.name}.")
        elif isinstance(node, ast.FunctionDef) and (
            not node.name.startswith("_") or node.name in ("__init__",)
        ):
            decorators = [ast.unparse(d) for d in node.decorator_list]
            kind = "property " if "property" in decorators else ""
            doc = ast.get_docstring(node)
            if not prefix:  # a module-level function: a heading of its own
                out += [f"{'#' * level} `{py_signature(node)}`", ""] + ([doc, ""] if doc else [])
                continue
            out += [f"- {kind}`{prefix}{py_signature(node)}`"]
            if doc:
                out += ["", "  " + "\n  ".join(doc.splitlines()), ""]
    if out and out[-1]:
        out.append("")
    return out


def python_api() -> str:
    pkg = ROOT / "bindings" / "python" / "python" / "txvfs"
    out = [
        "# Python API reference",
        "",
        "Generated from the package's type stubs and docstrings (`bindings/python/python/txvfs`)",
        "by `tests/docs/blocks.py api` (the tests fail when it is stale). See [Python](../python.md)",
        "for the guide.",
        "",
    ]
    for name, title in (
        ("_txvfs.pyi", "txvfs (the native module, re-exported by the package)"),
        ("__init__.py", "txvfs"),
        ("fsspec.py", "txvfs.fsspec"),
        ("sqlite.py", "txvfs.sqlite"),
        ("upath.py", "txvfs.upath"),
    ):
        tree = ast.parse((pkg / name).read_text())
        out += [f"## {title}", ""]
        doc = ast.get_docstring(tree)
        if doc:
            out += [doc, ""]
        out += py_members(tree.body, 3, "")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def api(check_only: bool) -> int:
    stale = []
    for name, text in (("c.md", c_api()), ("python.md", python_api())):
        path = ROOT / "docs" / "api" / name
        if check_only:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(ROOT)))
        else:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
    for s in stale:
        print(f"{s} is stale: run python3 tests/docs/blocks.py api", file=sys.stderr)
    return 1 if stale else 0


def main() -> int:
    args = sys.argv[1:]
    if args == ["list"]:
        for b in all_blocks():
            print(f"{b.where}\t{b.lang}\t{' '.join(b.attrs)}" + ("\toutput" if b.output else ""))
        return 0
    if args == ["check"]:
        return check()
    if args[:1] == ["run"] and args[1:]:
        return run(args[1:])
    if args[:1] == ["api"]:
        return api(args[1:] == ["--check"])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
