#!/usr/bin/env bash
# Build promtool (Prometheus' rule checker and unit tester) from the Go module proxy, pinned, into
# a cache outside the repository, like tests/cluster/build.sh:
#
#   ${BACKSCROLL_PROMTOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/backscroll/promtool}/<version>-<go>/promtool
#
# A second run with the same key is instant. The last line on stdout is the binary's path.
set -euo pipefail

# Prometheus 3's Go module versions are v0.3xx.y (v0.316.0 is Prometheus 3.16.0).
PROMETHEUS_MODULE_VERSION=v0.316.0
log() { printf 'promtool-build: %s\n' "$*" >&2; }

command -v go >/dev/null || { log "go is not on PATH (Go >= 1.26 builds promtool)"; exit 1; }
KEY="prometheus-${PROMETHEUS_MODULE_VERSION}-$(go env GOVERSION)"
DIR="${BACKSCROLL_PROMTOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/backscroll/promtool}/$KEY"
if [[ -x "$DIR/promtool" ]]; then echo "$DIR/promtool"; exit 0; fi

mkdir -p "$DIR"
log "building promtool ${PROMETHEUS_MODULE_VERSION} into $DIR (once; minutes on a cold Go cache)"
start=$SECONDS
# -trimpath and no VCS stamp: the same binary from the same pins.
GOFLAGS=-mod=mod GOBIN="$DIR/.part" go install -trimpath -ldflags "-s -w" \
	"github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_MODULE_VERSION}"
mv "$DIR/.part/promtool" "$DIR/promtool" && rmdir "$DIR/.part"
log "built in $((SECONDS - start)) s"
"$DIR/promtool" --version >&2
echo "$DIR/promtool"
