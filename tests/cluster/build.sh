#!/usr/bin/env bash
# Build the pinned control plane (kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, etcd, kwok) from the Go modules in tests/cluster/{kubernetes,etcd,kwok}, into a cache
# outside the repository:
#
#   ${BACKSCROLL_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/backscroll/cluster}/<key>/bin
#
# <key> names the versions and a hash of the go.mod/go.sum files, this script and the Go version,
# so a second build with the same key is instant (the binaries and a stamp exist), and a change
# of pins builds anew beside the old one. Progress goes to stderr; the last line on stdout is the
# bin folder. `build.sh --print-bin` prints that folder without building.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
KWOK_VERSION=v0.8.0
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)

log() { printf 'cluster-build: %s\n' "$*" >&2; }

command -v go >/dev/null || { log "go is not on PATH (Go >= 1.26 builds the control plane)"; exit 1; }
GO_VERSION="$(go env GOVERSION)"
HASH="$(cd "$HERE" && cat kubernetes/go.mod kubernetes/go.sum etcd/go.mod etcd/go.sum \
	kwok/go.mod kwok/go.sum build.sh <(echo "$GO_VERSION") | sha256sum | cut -c1-12)"
KEY="k8s-${KUBE_VERSION}-etcd-${ETCD_VERSION}-kwok-${KWOK_VERSION}-${HASH}"
ROOT="${BACKSCROLL_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/backscroll/cluster}"
DIR="$ROOT/$KEY"
BIN="$DIR/bin"
STAMP="$DIR/stamp"

if [[ "${1:-}" == "--print-bin" ]]; then echo "$BIN"; exit 0; fi

complete() {
	[[ -f "$STAMP" ]] || return 1
	local b
	for b in "${BINARIES[@]}"; do [[ -x "$BIN/$b" ]] || return 1; done
}

if complete; then
	log "cached: $BIN"
	echo "$BIN"
	exit 0
fi

mkdir -p "$DIR"
# One build at a time per key (make cluster and a pytest run may start together).
exec 9>"$DIR/lock"
if ! flock -n 9; then
	log "another build of $KEY is running; waiting for it"
	flock 9
fi
if complete; then
	log "cached: $BIN"
	echo "$BIN"
	exit 0
fi

# Reproducible and offline but for the module proxy: the go.sum files are the truth, no
# toolchain download, no go.work from a parent folder, no VCS stamping.
export GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0
STAGE="$DIR/bin.tmp"
rm -rf "$STAGE"
mkdir -p "$STAGE"
start=$SECONDS

log "building into $BIN ($GO_VERSION, $(nproc) cores; a cold build takes many minutes)"
log "downloading modules"
for m in kubernetes etcd kwok; do (cd "$HERE/$m" && go mod download) ; done
log "modules ready after $((SECONDS - start)) s"

major="${KUBE_VERSION#v}"; major="${major%%.*}"
minor="${KUBE_VERSION#v*.}"; minor="${minor%%.*}"
vflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	vflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
	vflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

t=$SECONDS
log "kubernetes $KUBE_VERSION: kube-apiserver kube-controller-manager kube-scheduler kubectl (one go build)"
(cd "$HERE/kubernetes" && go build -trimpath -ldflags "-s -w$vflags" -o "$STAGE/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
log "kubernetes built in $((SECONDS - t)) s"

t=$SECONDS
log "etcd $ETCD_VERSION"
(cd "$HERE/etcd" && go build -trimpath -ldflags "-s -w" -o "$STAGE/etcd" go.etcd.io/etcd/server/v3)
log "etcd built in $((SECONDS - t)) s"

t=$SECONDS
log "kwok $KWOK_VERSION"
(cd "$HERE/kwok" && go build -trimpath \
	-ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${KUBE_VERSION#v}" \
	-o "$STAGE/kwok" sigs.k8s.io/kwok/cmd/kwok)
log "kwok built in $((SECONDS - t)) s"

rm -rf "$BIN"
mv "$STAGE" "$BIN"
printf 'kubernetes=%s etcd=%s kwok=%s go=%s built=%s seconds=%s\n' "$KUBE_VERSION" "$ETCD_VERSION" \
	"$KWOK_VERSION" "$GO_VERSION" "$(date -u +%FT%TZ)" "$((SECONDS - start))" > "$STAMP"
log "done in $((SECONDS - start)) s: $BIN"
echo "$BIN"
