#!/usr/bin/env bash
# A local Debian base image for hosts that cannot pull python:3.11-slim: debootstrap bookworm
# minbase with Debian's python3 (3.11) and venv, plus the few programs the images need offline
# (bubblewrap for the tool-runner, procps for the docker sandbox), then `docker import`.
#   scripts/base_image.sh [TAG [PACKAGES]]   default TAG crayfish-base:bookworm
# PACKAGES (comma-separated) replaces the list below, e.g. `nginx-light` for the gateway's base.
# APT_PACKAGES (comma-separated, a third argument) are installed afterwards with apt-get in the
# rootfs: debootstrap's own resolver cannot configure some (chromium's dconf-service).
# The rootfs tarball is kept in build/base/ (keyed by the package list) so the next import is quick.
# Needs root, debootstrap and a Debian mirror (DEBIAN_MIRROR, default deb.debian.org).
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-crayfish-base:bookworm}
docker=${DOCKER:-$(command -v /usr/bin/docker || command -v docker)}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=${2:-python3,python3-venv,ca-certificates,bubblewrap,procps}
apt_packages=${3:-}
key=$(echo "bookworm $packages $apt_packages" | sha256sum | cut -c1-12)
tarball=build/base/bookworm-$key.tar

if [ ! -s "$tarball" ]; then
  command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install debootstrap" >&2; exit 1; }
  [ "$(id -u)" = 0 ] || { echo "debootstrap needs root" >&2; exit 1; }
  mkdir -p build/base
  root=$(mktemp -d /tmp/crayfish-rootfs-XXXXXX)
  # --one-file-system: never into a /proc or /sys a failed debootstrap left mounted there
  trap 'rm -rf --one-file-system "$root"' EXIT
  echo "debootstrap bookworm minbase ($packages) into $root"
  for attempt in 1 2; do  # a mirror hiccup should not fail CI: one more try from scratch
    debootstrap --variant=minbase --include="$packages" bookworm "$root" "$mirror" \
      >"$root.log" 2>&1 && break
    tail -20 "$root.log" >&2
    [ "$attempt" = 2 ] && { rm -f "$root.log"; exit 1; }
    rm -rf --one-file-system "${root:?}"/*
  done
  rm -f "$root.log"
  if [ -n "$apt_packages" ]; then
    mount -t proc proc "$root/proc"
    trap 'umount "$root/proc" 2>/dev/null; rm -rf --one-file-system "$root"' EXIT
    echo "apt-get install ${apt_packages//,/ } in the rootfs"
    # shellcheck disable=SC2046  # the list is split on purpose
    DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -qq --no-install-recommends \
      $(echo "$apt_packages" | tr , ' ') >"$root.log" 2>&1 || { tail -20 "$root.log" >&2; exit 1; }
    umount "$root/proc"
    rm -f "$root.log"
  fi
  # What an image never needs: package downloads and lists, manuals, translations, docs
  # (licences stay).
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/* \
    "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
  find "$root/usr/share/doc" -type f ! -name copyright -delete
  tar -C "$root" --numeric-owner -cf "$tarball.part" .
  mv "$tarball.part" "$tarball"
fi
"$docker" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
  --change 'CMD ["python3"]' \
  "$tarball" "$tag" >/dev/null
echo "$tag imported from $tarball"
