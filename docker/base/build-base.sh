#!/usr/bin/env bash
# The images' base, assembled from Debian bookworm packages (no container registry is needed):
# debootstrap --variant=minbase, then python3 (3.11), python3-venv and ca-certificates, with
# bookworm-updates and bookworm-security applied. Its root filesystem is cached as a tarball
# outside the repository, keyed by this script's content (the package list and the recipe are
# in it), and imported into the project's container storage as
#     localhost/backscroll-base:bookworm-<key>
# Prints that name. A second run finds the image (or the tarball) and takes a second or two.
# BASE_REFRESH=1 rebuilds the rootfs (Debian's point releases and security updates).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../containers/env.sh
source "$here/../containers/env.sh"

SUITE=bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
PACKAGES=(python3 python3-venv ca-certificates)

key="$(sha256sum "$0" | cut -c1-12)"
image="localhost/backscroll-base:${SUITE}-${key}"
tarball="$BACKSCROLL_IMAGE_CACHE/base-${SUITE}-${key}.tar"

if [[ "${BASE_REFRESH:-}" != 1 ]] && podman image exists "$image"; then
  echo "$image"; exit 0
fi

if [[ "${BASE_REFRESH:-}" == 1 || ! -s "$tarball" ]]; then
  for tool in debootstrap; do
    command -v "$tool" >/dev/null || { echo "build-base: $tool is missing (make image-deps)" >&2; exit 1; }
  done
  rootfs="$(mktemp -d "$BACKSCROLL_IMAGE_CACHE/rootfs.XXXXXX")"
  trap 'rm -rf "$rootfs"' EXIT
  echo "build-base: debootstrap --variant=minbase $SUITE from $MIRROR" >&2
  debootstrap --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" \
    "$SUITE" "$rootfs" "$MIRROR" >&2
  # Point releases and security fixes: the suite's -updates and -security on top.
  cat > "$rootfs/etc/apt/sources.list" <<SOURCES
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY_MIRROR $SUITE-security main
SOURCES
  chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    sh -c 'apt-get update -qq && apt-get -y -qq -o Dpkg::Use-Pty=0 upgrade && apt-get clean' >&2
  # Small: no package lists, archives, documentation, manuals or translations; no logs.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
         "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
         "$rootfs"/usr/share/locale/* "$rootfs"/var/log/* "$rootfs"/tmp/* "$rootfs"/root/.cache
  # What the runtime provides: /dev, /proc, /sys, /run are mounted by it.
  rm -rf "$rootfs"/dev/* "$rootfs"/proc/* "$rootfs"/sys/* "$rootfs"/run/*
  # Documentation stays out of later package installs too.
  cat > "$rootfs/etc/dpkg/dpkg.cfg.d/01-nodoc" <<'NODOC'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
NODOC
  tar --numeric-owner --xattrs -C "$rootfs" -cf "$tarball.part" .
  mv "$tarball.part" "$tarball"
  echo "build-base: rootfs cached in $tarball ($(du -h "$tarball" | cut -f1))" >&2
fi

podman import --quiet \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["python3"]' \
  --message "debootstrap --variant=minbase $SUITE + ${PACKAGES[*]} (build-base.sh $key)" \
  "$tarball" "$image" >/dev/null
echo "$image"
