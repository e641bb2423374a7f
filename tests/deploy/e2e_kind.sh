#!/usr/bin/env bash
# `make e2e-kind`: the real-cluster path, for a machine with Docker and kind (not run in CI here).
# A kind cluster, both images loaded, the chart with the quickstart PostgreSQL and a lexical
# SearchIndex, Ready, one authenticated request through a port-forward, then teardown.
set -euo pipefail
: "${KIND_CLUSTER:=backscroll-e2e}" "${HELM:=helm}" "${VERSION:?}"
NS=backscroll
command -v kind >/dev/null || { echo "e2e-kind needs kind (https://kind.sigs.k8s.io)" >&2; exit 1; }
trap 'kind delete cluster --name "$KIND_CLUSTER" >/dev/null 2>&1 || true; kill %1 2>/dev/null || true' EXIT

kind create cluster --name "$KIND_CLUSTER" --wait 120s
kind load docker-image --name "$KIND_CLUSTER" "${REGISTRY:-ghcr.io/backscroll}/backscroll:$VERSION" \
  "${REGISTRY:-ghcr.io/backscroll}/backscroll-operator:$VERSION"
"$HELM" install backscroll charts/backscroll -n "$NS" --create-namespace --wait \
  -f charts/backscroll/examples/quickstart.yaml
kubectl -n "$NS" rollout status statefulset/backscroll-postgresql --timeout=180s
kubectl -n "$NS" wait --for=condition=MigrationsApplied searchindex/search --timeout=300s
kubectl -n "$NS" rollout status deploy/search-api --timeout=180s
# The operator reads the status with its own `status` token; this one is the test's, for the curl below.
token=$(kubectl -n "$NS" exec deploy/search-api -- backscroll tokens create --kind status --name e2e-status | tail -1)
kubectl -n "$NS" wait --for=condition=Ready searchindex/search --timeout=300s
kubectl -n "$NS" port-forward svc/search-api 18080:8080 >/dev/null &
sleep 3
curl -fsS localhost:18080/readyz
curl -fsS -H "Authorization: Bearer $token" localhost:18080/v1/status
# A search through the port-forward: a workspace, one conversation ingested over HTTP, a reader
# who sees every agent, and a word of it found again.
api() { kubectl -n "$NS" exec deploy/search-api -- backscroll "$@" | tail -1; }
api workspaces create e2e --name "e2e" >/dev/null
ingest=$(api tokens create --kind ingest --workspace e2e --name e2e-ingest)
reader=$(api tokens create --kind reader --workspace e2e --actor web:e2e/alice --agents all --name e2e-reader)
conv=$(curl -fsS -X POST localhost:18080/v1/conversations -H "Authorization: Bearer $ingest" \
         -H 'Content-Type: application/json' \
         -d '{"agent": "concierge", "connector": {"type": "web", "name": "e2e"}, "external_id": "e2e-1",
              "title": "Kind cluster check", "creator": {"external_id": "alice"}}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
curl -fsS -X POST "localhost:18080/v1/conversations/$conv/messages" -H "Authorization: Bearer $ingest" \
     -H 'Content-Type: application/json' \
     -d '{"role": "user", "speaker": {"external_id": "alice"}, "body": "the marmalade shipment arrives Tuesday"}' >/dev/null
found=$(curl -fsS -G localhost:18080/v1/agent-sessions --data-urlencode q=marmalade -H "Authorization: Bearer $reader" \
          | python3 -c 'import json,sys; print([s["id"] for s in json.load(sys.stdin)["sessions"]])')
[ "$found" = "[$conv]" ] || { echo "e2e-kind: search found $found, expected [$conv]" >&2; exit 1; }
echo "e2e-kind: SearchIndex Ready; an ingested conversation found again by search through the port-forward"
