#!/usr/bin/env bash
# The OS programs the test suite needs: nats-server, bubblewrap (bwrap), chromium and prometheus. `npm test` runs this
# first (pretest), and so does .ci/run. A missing one is installed with apt-get where this may (root, apt-get
# present); elsewhere this stops, before any test starts, with the command to run.
set -euo pipefail

missing=()
why=()
if ! command -v nats-server >/dev/null 2>&1 && [ ! -x /usr/sbin/nats-server ]; then
  missing+=(nats-server); why+=("nats-server: the integration and end-to-end tests start their own NATS servers")
fi
if ! command -v bwrap >/dev/null 2>&1; then
  missing+=(bubblewrap); why+=("bubblewrap: every program a Handler runs is sandboxed with bwrap")
fi
if [ ! -x /usr/bin/chromium ]; then
  missing+=(chromium); why+=("chromium: the inspector's browser tests drive Debian's /usr/bin/chromium through playwright-core")
fi
if ! command -v prometheus >/dev/null 2>&1; then
  missing+=(prometheus); why+=("prometheus: the metrics test scrapes the roles with a real Prometheus server")
fi

[ "${#missing[@]}" -eq 0 ] && exit 0

for line in "${why[@]}"; do echo "test setup: missing ${line}" >&2; done
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "test setup: installing ${missing[*]} with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi
{
  echo "test setup: install them first, then run npm test again:"
  if command -v apt-get >/dev/null 2>&1; then
    echo "  sudo apt-get install -y ${missing[*]}"
  else
    echo "  the Debian/Ubuntu packages ${missing[*]} (apt-get install -y ${missing[*]}), or their equivalents of your system"
  fi
} >&2
exit 1
