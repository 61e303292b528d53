#!/usr/bin/env bash
# Makes sure the non-Go clients the tests run can be built: Node.js with npm
# (the `nats` npm client) and the NATS C client library (libnats-dev), both
# used by systest.TestNonGoClientsFromProtocolDoc to prove that
# docs/protocol.md is enough to write a frontend in another language. A
# missing one is installed with apt-get when this runs as root on Debian;
# otherwise it is reported in one sentence with the fix. Set
# MEMORYD_SKIP_TESTDEPS=1 to manage them yourself.
set -u
[ "${MEMORYD_SKIP_TESTDEPS:-}" = 1 ] && exit 0

missing=()
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
if ! pkg-config --exists libnats 2>/dev/null && [ ! -e /usr/include/nats/nats.h ] && [ ! -e /usr/include/nats.h ]; then
  missing+=(libnats-dev)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  log=$(mktemp "${TMPDIR:-/tmp}/memoryd-testdeps.XXXXXX")
  if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >"$log" 2>&1 ||
     { apt-get update -qq >>"$log" 2>&1 &&
       DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >>"$log" 2>&1; }; then
    rm -f "$log"
    exit 0
  fi
  echo "The tests need ${missing[*]} and apt-get could not install them (see $log): install them and run make test again." >&2
  exit 1
fi
echo "The tests need ${missing[*]}: install them (apt-get install ${missing[*]}) and run make test again." >&2
exit 1
