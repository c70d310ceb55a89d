#!/usr/bin/env bash
# Fetches and unpacks Debian's sqlite3 source package (speedtest1.c, the TCL tests) into DIR/src,
# through a private apt configuration with deb-src entries, so the machine's apt sources stay
# as they are.   usage: benches/sqlite/fetch-sqlite-source.sh DIR
set -euo pipefail
dir=${1:?usage: fetch-sqlite-source.sh DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$dir"
# The same archives as the machine's deb entries, as source entries (deb822: the name must end in .sources).
sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources >"$tmp/src.sources"
apt=(apt-get -o APT::Sandbox::User=root -o Dir::Etc::SourceList="$tmp/src.sources"
     -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$tmp/lists")
"${apt[@]}" update -qq
command -v dpkg-source >/dev/null || apt-get install -y -qq dpkg-dev >/dev/null
(cd "$tmp" && "${apt[@]}" source --download-only sqlite3 >/dev/null 2>&1)
rm -rf "$dir/src"
dpkg-source --no-check -x "$(ls "$tmp"/sqlite3_*.dsc | head -n 1)" "$dir/src" >/dev/null
echo "$dir/src"
