#!/usr/bin/env bash
# The Debian packages Crayfish needs outside Python: installs the missing ones when it can (root
# with apt-get), else names them and stops. `system_deps.sh run` for running, `test` for the suite.
set -euo pipefail
need=()
want() { command -v "$1" >/dev/null 2>&1 || need+=("$2"); }

# The default sandbox (bwrap) and the limits every backend sets (prlimit, setpriv).
if [ "${1:-run}" = test ] || [ "${TOOL_RUNNER_SANDBOX:-bwrap}" = bwrap ]; then
  want bwrap bubblewrap
fi
want prlimit util-linux
# The browser service and the web page's end-to-end test. Without it (and without root to install
# it) `make run` still starts: the browser tools then say the browser is not installed.
if [ "${1:-run}" = test ] || [ "$(id -u)" = 0 ]; then
  want chromium chromium
elif ! command -v chromium >/dev/null 2>&1; then
  echo "note: chromium is not installed; the browser tools need it (sudo apt-get install chromium)" >&2
fi
if [ "${1:-run}" = test ]; then
  want dockerd docker.io   # the docker backend's tests (a private dockerd)
  want debootstrap debootstrap  # make images where python:3.11-slim can't be pulled (test-compose)
fi
[ "${#need[@]}" -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing missing system packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
  echo "missing system packages: ${need[*]}; install them (sudo apt-get install ${need[*]})" >&2
  exit 1
fi
