#!/usr/bin/env bash
# Runs a command as a machine with only Node would: inside an empty network namespace (nothing
# listens, loopback up) and with PostgreSQL's and Redis's programs off the PATH, no DATABASE_URL
# or REDIS_URL. `npm test` must pass so (issue 25). Needs root (or user namespaces) for unshare.
#   bash scripts/only-node.sh npm test
set -euo pipefail
if [ "${MNEMO_ONLY_NODE_INSIDE:-}" != 1 ]; then
  exec env MNEMO_ONLY_NODE_INSIDE=1 unshare -n bash "$0" "$@"
fi
ip link set lo up
bin=$(mktemp -d)
# runuser -u nobody (test/integration/data-dir-permissions.test.ts) runs programs from here too.
chmod 755 "$bin"
trap 'rm -rf "$bin"' EXIT
# Every program on the PATH but the servers' and their clients'.
IFS=: read -ra dirs <<<"$PATH"
for dir in "${dirs[@]}"; do
  [ -d "$dir" ] || continue
  for program in "$dir"/*; do
    name=${program##*/}
    case "$name" in
      psql | pg_* | postgres* | initdb | createdb | dropdb | createuser | dropuser | pgbench | clusterdb | reindexdb | vacuumdb | redis* | pgbouncer | haproxy) continue ;;
    esac
    [ -e "$bin/$name" ] || ln -s "$program" "$bin/$name"
  done
done
unset DATABASE_URL REDIS_URL MNEMO_TEST_CONTAINERS
export PATH=$bin
"$@"
