#!/usr/bin/env bash
# Makes sure the Citus extension is installed for the local PostgreSQL major version.
#
# No registry here serves Citus, so it is built from a source tarball (`git archive` of a
# release tag): CITUS_TARBALL, by default ../shared/vendor/citus-13.2.2.tar.gz beside the
# checkout. Citus 13.2 is the last line that supports PostgreSQL 15 (Debian 12's). Idempotent:
# a machine that already has it returns at once. It only installs the files; a cluster loads
# Citus through `shared_preload_libraries` (test/citus/helpers/cluster.ts starts such clusters).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
tarball=${CITUS_TARBALL:-"$root/../shared/vendor/citus-13.2.2.tar.gz"}

pg_major=${PG_MAJOR:-$(ls /usr/lib/postgresql | sort -V | tail -n 1)}
pg_config="/usr/lib/postgresql/${pg_major}/bin/pg_config"

if [ -f "$("$pg_config" --pkglibdir)/citus.so" ] && [ -f "$("$pg_config" --sharedir)/extension/citus.control" ]; then
  echo "citus: already installed for PostgreSQL ${pg_major}"
  exit 0
fi
if [ ! -f "$tarball" ]; then
  echo "citus: not installed, and no source tarball at $tarball (set CITUS_TARBALL)" >&2
  exit 1
fi
echo "citus: not installed; building $(basename "$tarball") for PostgreSQL ${pg_major}"

needed=(build-essential "postgresql-server-dev-${pg_major}" libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libicu-dev)
missing=()
for pkg in "${needed[@]}"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "citus: installing build dependencies: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "${missing[@]}" >/dev/null || { apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work"
src=$work
[ -f "$src/configure" ] || src=$(dirname "$(find "$work" -maxdepth 2 -name configure | head -n 1)")

# PostgreSQL 15.20 exports have_createdb_privilege(); Citus 13.2.2 still defines a static copy
# for older minors, and the two declarations do not compile together. Drop the copy when the
# server's headers declare the function (see ../shared/vendor/README.md).
compat="$src/src/include/pg_version_compat.h"
if grep -q 'extern bool have_createdb_privilege' "$("$pg_config" --includedir-server)/commands/dbcommands.h" 2>/dev/null \
  && grep -q '^have_createdb_privilege(void)' "$compat"; then
  echo "citus: removing the have_createdb_privilege() compat copy this PostgreSQL already exports"
  python3 - "$compat" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
block = re.compile(r"static inline bool\nhave_createdb_privilege\(void\)\n\{.*?\n\}\n", re.S)
text, n = block.subn("", text, count=1)
if n != 1:
    sys.exit("citus: could not find the have_createdb_privilege() block to remove")
open(path, "w").write(text)
PY
fi

cd "$src"
started=$(date +%s)
./configure --quiet PG_CONFIG="$pg_config" >/dev/null
# with_llvm=no skips the LLVM bitcode: half the build time, and JIT is not used here.
make -s -j"$(nproc)" with_llvm=no PG_CONFIG="$pg_config" >/dev/null
make -s with_llvm=no PG_CONFIG="$pg_config" install >/dev/null
echo "citus: installed in $(( $(date +%s) - started )) s"
