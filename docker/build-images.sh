#!/usr/bin/env bash
# `make images`: both images from docker/api.Dockerfile and docker/operator.Dockerfile, tagged
#     $REGISTRY/backscroll:$VERSION  and  $REGISTRY/backscroll-operator:$VERSION
# (REGISTRY defaults to ghcr.io/backscroll, the name the chart and the kustomize base use;
# VERSION to pyproject.toml's). Prints the two names, one a line, on stdout.
#
# CONTAINER_BUILD=buildah (the default): buildah, chroot isolation, on the Debian base that
# docker/base/build-base.sh assembles (PYTHON_IMAGE), into the project's own container storage
# (docker/containers/env.sh: outside the repository, so a second build reuses every layer).
# CONTAINER_BUILD=docker: `docker build`, on PYTHON_IMAGE (default: the Dockerfiles' own,
# docker.io/library/python:3.11.13-slim-bookworm), where a Docker engine and Docker Hub exist.
set -euo pipefail
cd "$(dirname "$0")/.."
REGISTRY="${REGISTRY:-ghcr.io/backscroll}"
REGISTRY="${REGISTRY%/}"
VERSION="${VERSION:-$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)}"
REVISION="${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
CONTAINER_BUILD="${CONTAINER_BUILD:-buildah}"
declare -A NAMES=([api]=backscroll [operator]=backscroll-operator)
IMAGES=(api operator)
[[ $# -gt 0 ]] && IMAGES=("$@")

args=(--build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION")
case "$CONTAINER_BUILD" in
  buildah)
    for tool in buildah podman runc; do
      command -v "$tool" >/dev/null || { echo "make images: $tool is missing; run make image-deps" >&2; exit 1; }
    done
    source docker/containers/env.sh
    base="${PYTHON_IMAGE:-$(docker/base/build-base.sh)}"
    # pip reaches PyPI with the host's trust store (which may hold a TLS-inspecting proxy's CA):
    # mounted over the base's bundle for the RUN steps only, never part of a layer. Debian's pip
    # reads that bundle.
    trust=()
    host_ca="${BACKSCROLL_BUILD_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
    [[ -s "$host_ca" ]] && trust=(--volume "$host_ca:/etc/ssl/certs/ca-certificates.crt:ro")
    started="$(date --utc +%Y-%m-%dT%H:%M:%SZ)"
    for image in "${IMAGES[@]}"; do
      name="$REGISTRY/${NAMES[$image]}:$VERSION"
      echo "make images: $name on $base" >&2
      # --layers: every step is cached in the storage; only what a change touches is rebuilt.
      # The build stage is named too (localhost/backscroll-build:IMAGE), so that pruning below
      # keeps its layers: a change to the code then reinstalls the package only, not the lockfile.
      build=(buildah build --isolation chroot --layers --force-rm --pull=never
             --build-arg "PYTHON_IMAGE=$base" "${args[@]}" "${trust[@]}" -f "docker/$image.Dockerfile")
      "${build[@]}" --target build -t "localhost/backscroll-build:$image" . >&2
      "${build[@]}" -t "$name" . >&2
      echo "$name"
    done
    # What earlier builds left untagged (superseded images and their layers) goes; the storage
    # then holds the base, the build stages and the images, not one copy per change.
    podman image prune --force --filter "until=$started" >/dev/null 2>&1 || true
    ;;
  docker)
    docker info >/dev/null 2>&1 || { echo "make images: CONTAINER_BUILD=docker needs a running Docker engine" >&2; exit 1; }
    [[ -n "${PYTHON_IMAGE:-}" ]] && args+=(--build-arg "PYTHON_IMAGE=$PYTHON_IMAGE")
    for image in "${IMAGES[@]}"; do
      name="$REGISTRY/${NAMES[$image]}:$VERSION"
      docker build "${args[@]}" -f "docker/$image.Dockerfile" -t "$name" . >&2
      echo "$name"
    done
    ;;
  *) echo "make images: CONTAINER_BUILD is buildah or docker, not $CONTAINER_BUILD" >&2; exit 2 ;;
esac
