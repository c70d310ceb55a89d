"""MkDocs hooks for the txvfs book (mkdocs.yml).

- A fence's info string may carry attributes after the language (```sh no_run, ```rust ignore)
  for tests/docs/blocks.py; Python-Markdown would not see such a fence as code, so the
  attributes are dropped before rendering. In rust blocks, lines that start with "# " are
  hidden, as rustdoc and mdBook do.
- Charts live in benches/charts/ (drawn by benches/charts.py); chapters link them as
  ../benches/charts/NAME.svg, which GitHub follows. The book copies them in as charts/NAME.svg.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(\s*)(```+)([\w+-]+)[ \t]+[^\n`]*$", re.M)
RUST_BLOCK = re.compile(r"^```rust\n(.*?)^```$", re.M | re.S)


def _hide_rust_lines(m: re.Match[str]) -> str:
    body = "".join(
        line for line in m.group(1).splitlines(True) if not (line.startswith("# ") or line == "#\n")
    )
    return "```rust\n" + body + "```"


def on_page_markdown(markdown: str, **_: object) -> str:
    markdown = FENCE.sub(lambda m: m.group(1) + m.group(2) + m.group(3), markdown)
    markdown = RUST_BLOCK.sub(_hide_rust_lines, markdown)
    return markdown.replace("](../benches/charts/", "](charts/")


def on_files(files, config, **_: object):  # noqa: ANN001, ANN201 (MkDocs' own types)
    charts = ROOT / "benches" / "charts"
    for svg in sorted(charts.glob("*.svg")):
        files.append(
            File(
                f"charts/{svg.name}",
                src_dir=str(ROOT / "benches"),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files
