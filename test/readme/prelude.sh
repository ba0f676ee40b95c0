# The start of the script test/readme/readme.check.ts runs: the helpers the pages' commands run
# with. Then come the commands of the README and of the guide pages (test/readme/readme-script.ts),
# in order.
set -Eeuo pipefail
# One stream, so what a command printed and what it answered show in the order they happened.
exec 2>&1
__logs=${README_LOGS:?}
__pids=()
__where='(prelude)'
__passed=0

__block() { printf '\n=== block %s of %s (%s)\n' "$1" "$2" "$3"; }

# Prints "--- [step] PAGE:LINE (what)" and the command itself, read from a here-document.
__announce() {
  __where="$2"
  printf '\n--- [%s] %s (%s)\n' "$1" "$2" "$3"
  sed 's/^/  $ /'
}

__done() { __passed=$((__passed + 1)); }

__on_error() { printf '\n✗ failed at %s (exit %s)\n' "$__where" "$1" >&2; }
# A command the page expects to fail runs without errexit and without the failure report.
__tolerate() { trap - ERR; set +e; }
__strict() { set -e; trap '__on_error $?' ERR; }
__strict

# The pages' curl, checked: the body is printed as curl prints it (plus a newline), the status
# goes to stderr, and a status other than the one the command's comment expects (else any 2xx)
# fails the command.
curl() {
  local body status want
  body=$(mktemp)
  if ! status=$(command curl -sS -o "$body" -w '%{http_code}' "$@"); then
    cat "$body"; rm -f "$body"
    printf '\n✗ curl did not complete the request (%s)\n' "$__where" >&2
    return 1
  fi
  cat "$body"; rm -f "$body"; printf '\n'
  want=${__expect_status:-2xx}
  if [[ $want == 2xx && $status == 2?? ]]; then
    printf '  ← HTTP %s\n' "$status" >&2
  elif [[ $status == "$want" ]]; then
    printf '  ← HTTP %s, as the page says\n' "$status" >&2
  else
    printf '✗ HTTP %s at %s; the page expects %s\n' "$status" "$__where" "$want" >&2
    return 1
  fi
}

__check_exit() {
  if [[ $2 != "$1" ]]; then
    printf '✗ exit %s at %s; the page expects exit %s\n' "$2" "$__where" "$1" >&2
    exit 1
  fi
  printf '  ← exit %s, as the page says\n' "$2" >&2
}

# A long-running command (the API, the worker), started in the background with its output in a
# log, and awaited: the API until /readyz answers 200, the worker until it logs "worker started".
declare -A __running=()
__background() {
  local name=$1 command log pid
  command=$(cat)
  # Started again while the first still runs: the reader stops the first with Ctrl-C before
  # starting the second; SIGTERM is that.
  if [[ -n ${__running[$name]:-} ]]; then
    __stop "$name"
  fi
  log="$__logs/$name.$((${#__pids[@]} + 1)).log"
  # A process group of its own (setsid), so stopping it reaches npm and node under bash too.
  setsid bash -c "$command" >"$log" 2>&1 &
  pid=$!
  __pids+=("$pid")
  __running[$name]=$pid
  for _ in $(seq 1 600); do
    if [[ $name == api ]] && [[ $(command curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${PORT:?}/readyz" || true) == 200 ]]; then
      printf '  ← the API answers /readyz on port %s (log: %s)\n' "$PORT" "$log"
      __passed=$((__passed + 1))
      return 0
    fi
    if [[ $name == worker ]] && grep -q '"worker started"' "$log"; then
      printf '  ← the worker has started (log: %s)\n' "$log"
      __passed=$((__passed + 1))
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  printf '✗ %s did not come up (%s); its output:\n' "$name" "$__where" >&2
  tail -n 40 "$log" >&2
  exit 1
}

# The reader's Ctrl-C in the shell of a background process (a page's `<!-- test:readme stops the
# api -->`, or the same process started again): SIGTERM to its group, then wait until it has exited,
# so what it held (the embedded data directory's lock) is free for the next command.
__stop() {
  local name=$1 pid=${__running[$1]:-}
  if [[ -z $pid ]]; then
    printf '✗ the page stops the %s, but none runs (%s)\n' "$name" "$__where" >&2
    exit 1
  fi
  kill -TERM -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset "__running[$name]"
  printf '  ← stopped the %s started before (the reader'"'"'s Ctrl-C)\n' "$name"
}

# The background processes get SIGTERM (npm passes it on) when the script ends, however it ends;
# an end before __finish (an unset variable stops bash without the ERR trap) names where.
__finished=
__on_exit() {
  local code=$?
  if [[ -z $__finished ]]; then printf '\n✗ stopped at %s (exit %s)\n' "$__where" "$code"; fi
  local pid
  for pid in "${__pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  if ((${#__pids[@]})); then wait "${__pids[@]}" 2>/dev/null || true; fi
}
trap __on_exit EXIT

__finish() {
  __finished=yes
  printf '\n=== README and guide: all %s commands passed\n' "$__passed"
}
