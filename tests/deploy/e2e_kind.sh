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
kind load docker-image --name "$KIND_CLUSTER" "backscroll:$VERSION" "backscroll-operator:$VERSION"
"$HELM" install backscroll charts/backscroll -n "$NS" --create-namespace --wait \
  -f charts/backscroll/examples/quickstart.yaml
kubectl -n "$NS" rollout status statefulset/backscroll-postgresql --timeout=180s
kubectl -n "$NS" wait --for=condition=MigrationsApplied searchindex/search --timeout=300s
kubectl -n "$NS" rollout status deploy/search-api --timeout=180s
token=$(kubectl -n "$NS" exec deploy/search-api -- backscroll tokens create --kind admin --name operator | tail -1)
kubectl -n "$NS" create secret generic backscroll-status-token --from-literal=token="$token"
kubectl -n "$NS" wait --for=condition=Ready searchindex/search --timeout=300s
kubectl -n "$NS" port-forward svc/search-api 18080:8080 >/dev/null &
sleep 3
curl -fsS localhost:18080/readyz
curl -fsS -H "Authorization: Bearer $token" localhost:18080/v1/status
echo "e2e-kind: SearchIndex Ready, API answered"
