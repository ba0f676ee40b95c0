#!/usr/bin/env bash
# Makes sure the pgvector extension is available to the local PostgreSQL cluster.
#
# Debian 12 does not package pgvector, so when `vector` is missing we build it from Debian's
# own (trixie) source package against the running server's major version. Idempotent: a
# machine that already has it returns at once.
set -euo pipefail

PSQL=(psql -h "${PGHOST:-127.0.0.1}" -p "${PGPORT:-5432}" -U "${PGUSER:-postgres}" -d "${PGDATABASE:-postgres}" -XtAq)

if [ "$("${PSQL[@]}" -c "select count(*) from pg_available_extensions where name = 'vector'")" = "1" ]; then
  echo "pgvector: already available"
  exit 0
fi

pg_major=$("${PSQL[@]}" -c "show server_version_num" | cut -c1-2)
pg_config="/usr/lib/postgresql/${pg_major}/bin/pg_config"
echo "pgvector: not available; building it from Debian's source package for PostgreSQL ${pg_major}"

src_list=/etc/apt/sources.list.d/trixie-src.list
if [ ! -f "$src_list" ]; then
  echo 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main' > "$src_list"
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "postgresql-server-dev-${pg_major}" build-essential dpkg-dev >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
apt-get source -qq pgvector >/dev/null
cd pgvector-*/
make -s PG_CONFIG="$pg_config" >/dev/null
make -s PG_CONFIG="$pg_config" install >/dev/null

# Installing the server dev package can upgrade the server to a newer point release; a
# cluster still running the old binaries must be restarted to load extensions cleanly.
running=$("${PSQL[@]}" -c "show server_version" | awk '{print $1}')
installed=$("/usr/lib/postgresql/${pg_major}/bin/postgres" --version | awk '{print $3}')
if [ "$running" != "$installed" ]; then
  echo "pgvector: restarting PostgreSQL ${running} -> ${installed}"
  pg_ctlcluster --skip-systemctl-redirect "$pg_major" main restart
fi

if [ "$("${PSQL[@]}" -c "select count(*) from pg_available_extensions where name = 'vector'")" != "1" ]; then
  echo "pgvector: build finished but PostgreSQL still does not list the extension" >&2
  exit 1
fi
echo "pgvector: installed"
