#!/usr/bin/env bash
# Make a Debian base image without a registry: mmdebstrap (or debootstrap) builds a minimal
# bookworm root filesystem from Debian's own mirror and `docker import` turns it into an image.
#
#   scripts/bootstrap-base.sh IMAGE_TAG
#
# Runs once per machine: the image is the cache, and an existing IMAGE_TAG is left alone.
# Needs root (or passwordless sudo) for the bootstrap; installs mmdebstrap when it is missing.
set -euo pipefail

TAG=${1:?usage: bootstrap-base.sh IMAGE_TAG}
SUITE=${DEBIAN_SUITE:-bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# What every minihpc image needs; the service images add their own packages on top.
PACKAGES=ca-certificates,python3,python3-venv,procps

if docker image inspect "$TAG" >/dev/null 2>&1; then
    echo "==> base image $TAG already here"
    exit 0
fi

SUDO=()
if [ "$(id -u)" != 0 ]; then
    if ! sudo -n true 2>/dev/null; then
        echo "bootstrap-base: building a Debian root filesystem needs root; run 'sudo make build' once" >&2
        exit 1
    fi
    SUDO=(sudo -n)
fi

if ! command -v mmdebstrap >/dev/null && ! command -v debootstrap >/dev/null; then
    echo "==> installing mmdebstrap from Debian's packages"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null 2> >(grep -v '^debconf: delaying' >&2)
fi

work=$(mktemp -d)
trap '"${SUDO[@]}" rm -rf "$work"' EXIT
start=$(date +%s)
echo "==> bootstrapping Debian $SUITE into an image $TAG (once per machine, about 25 s)"
if command -v mmdebstrap >/dev/null; then
    "${SUDO[@]}" mmdebstrap --quiet --variant=minbase --include="$PACKAGES" \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
        "$SUITE" "$work/rootfs.tar" \
        "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" "deb $SECURITY $SUITE-security main"
else
    "${SUDO[@]}" debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work/rootfs" "$MIRROR" >/dev/null
    printf 'deb %s %s main\ndeb %s %s-updates main\ndeb %s %s-security main\n' \
        "$MIRROR" "$SUITE" "$MIRROR" "$SUITE" "$SECURITY" "$SUITE" | "${SUDO[@]}" tee "$work/rootfs/etc/apt/sources.list" >/dev/null
    "${SUDO[@]}" rm -rf "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/cache/apt/"*.bin
    "${SUDO[@]}" tar -C "$work/rootfs" -cf "$work/rootfs.tar" .
fi
"${SUDO[@]}" cat "$work/rootfs.tar" | docker import \
    --change 'CMD ["bash"]' --change 'ENV LANG=C.UTF-8' \
    --message "Debian $SUITE bootstrapped by minihpc from $MIRROR" - "$TAG" >/dev/null
echo "==> base image $TAG ready in $(( $(date +%s) - start ))s ($(docker image inspect -f '{{.Size}}' "$TAG" | numfmt --to=iec))"
