#!/usr/bin/env bash
# `make images`: every Crayfish image, built with no network inside the builds.
#   crayfish-{tool-runner,memory,skills,connectors,orchestrator,channels,postgres,gateway}:latest,
#   crayfish-sandbox:latest
# Base: BASE_IMAGE if set; else python:3.11-slim when the engine has it or can pull it; else a
# local Debian base (scripts/base_image.sh: debootstrap bookworm minbase + python3 + venv).
# Python packages: a host-built wheelhouse (scripts/wheelhouse.sh), installed with --no-index.
# The gateway: GATEWAY_BASE if set; else nginx:stable when present or pullable; else a local
# Debian base with nginx-light (scripts/base_image.sh again, built beside the wheelhouse).
# WITH_BROWSER=1 also builds crayfish-browser:latest on BROWSER_BASE, else a local Debian base
# with chromium (scripts/base_image.sh; not by default: it needs root, debootstrap and ~2 min).
# DOCKER picks the client (default: Debian's /usr/bin/docker when present, it matches its daemon);
# PULL_BASE=no never asks a registry for python:3.11-slim (tests and CI).
set -euo pipefail
cd "$(dirname "$0")/.."
docker=${DOCKER:-$(command -v /usr/bin/docker || command -v docker)}
export DOCKER=$docker DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0}
started=$(date +%s)
elapsed() { echo "$(( $(date +%s) - started ))s"; }

base=${BASE_IMAGE:-}
if [ -z "$base" ]; then
  if "$docker" image inspect python:3.11-slim >/dev/null 2>&1; then
    base=python:3.11-slim
  elif [ "${PULL_BASE:-yes}" != no ] && "$docker" pull -q python:3.11-slim >/dev/null 2>&1; then
    base=python:3.11-slim
  else
    echo "python:3.11-slim is not available: building a local Debian base"
    scripts/base_image.sh crayfish-base:bookworm
    base=crayfish-base:bookworm
  fi
fi
echo "base image: $base ($(elapsed))"

gateway_base=${GATEWAY_BASE:-}
gateway_pid=
if [ -z "$gateway_base" ]; then
  if "$docker" image inspect nginx:stable >/dev/null 2>&1; then
    gateway_base=nginx:stable
  elif [ "${PULL_BASE:-yes}" != no ] && "$docker" pull -q nginx:stable >/dev/null 2>&1; then
    gateway_base=nginx:stable
  else
    gateway_base=crayfish-gateway-base:bookworm
    mkdir -p build/logs
    scripts/base_image.sh "$gateway_base" nginx-light >build/logs/gateway-base.log 2>&1 &
    gateway_pid=$!
  fi
fi

browser_base=${BROWSER_BASE:-crayfish-browser-base:bookworm}
browser_pid=
if [ "${WITH_BROWSER:-0}" = 1 ] && ! "$docker" image inspect "$browser_base" >/dev/null 2>&1; then
  mkdir -p build/logs
  scripts/base_image.sh "$browser_base" python3,python3-venv,ca-certificates \
    chromium,fonts-liberation,libatomic1 >build/logs/browser-base.log 2>&1 &
  browser_pid=$!
fi

scripts/wheelhouse.sh build/wheels
echo "wheelhouse ready ($(elapsed))"
if [ -n "$gateway_pid" ]; then
  wait "$gateway_pid" || { cat build/logs/gateway-base.log >&2; exit 1; }
fi
echo "gateway base: $gateway_base ($(elapsed))"

# The builds run side by side (about twice as fast on 2 cores); each one's output goes to
# build/logs/IMAGE.log and is shown when it fails.
mkdir -p build/logs
build() {  # IMAGE DOCKERFILE CONTEXT [BUILD ARGS...]
  "$docker" build --network none --build-arg BASE_IMAGE="$base" --build-arg PIP_NO_INDEX=1 \
    "${@:4}" -t "$1" -f "$2" "$3" >"build/logs/${1%%:*}.log" 2>&1
}
pids=()
for service in tool-runner skills connectors orchestrator channels postgres; do
  build "crayfish-$service:latest" "services/$service/Dockerfile" . & pids+=($!)
done
memory_args=()  # MEMORY_EXTRAS=[minilm]: torch and sentence-transformers in the memory image
[ -n "${MEMORY_EXTRAS:-}" ] && memory_args=(--build-arg "MEMORY_EXTRAS=$MEMORY_EXTRAS")
build crayfish-memory:latest services/memory/Dockerfile . "${memory_args[@]}" & pids+=($!)
build crayfish-sandbox:latest services/tool-runner/sandbox-image/Dockerfile \
  services/tool-runner/sandbox-image & pids+=($!)
build crayfish-gateway:latest services/gateway/Dockerfile . \
  --build-arg GATEWAY_BASE="$gateway_base" & pids+=($!)
if [ "${WITH_BROWSER:-0}" = 1 ]; then
  if [ -n "$browser_pid" ]; then
    wait "$browser_pid" || { cat build/logs/browser-base.log >&2; exit 1; }
  fi
  build crayfish-browser:latest services/browser/Dockerfile . \
    --build-arg BROWSER_BASE="$browser_base" & pids+=($!)
fi
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
images=(tool-runner memory skills connectors orchestrator channels postgres gateway sandbox)
[ "${WITH_BROWSER:-0}" = 1 ] && images+=(browser)
for image in "${images[@]}"; do
  if "$docker" image inspect "crayfish-$image:latest" >/dev/null 2>&1 && [ $failed = 0 ]; then
    echo "crayfish-$image:latest $("$docker" image inspect -f '{{.Size}}' "crayfish-$image:latest" \
      | awk '{printf "%.0f MB", $1 / 1e6}')"
  fi
done
if [ $failed != 0 ]; then
  for log in build/logs/*.log; do grep -q "Successfully tagged" "$log" || tail -25 "$log"; done >&2
  echo "image builds failed (logs in build/logs)" >&2
  exit 1
fi
echo "images built in $(elapsed)"
