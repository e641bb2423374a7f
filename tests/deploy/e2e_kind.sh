#!/usr/bin/env bash
# `make e2e-kind`: the control-plane suites (tests/cluster, tests/operator) on a kind cluster, for a
# machine with Docker and kind. A thin driver: it makes the cluster and hands its admin kubeconfig
# to the same pytest suites `make test` runs on the project's own control plane
# (BACKSCROLL_TEST_KUBECONFIG; tests/cluster/external.py). No token is minted here and nothing is
# exec'd into a pod: the operator runs as the chart's ServiceAccount, helm install and kubectl apply
# -k reach Ready, exactly as in CI. It cannot run on the project's own machines (no Docker engine).
#
#   make e2e-kind                         # every scenario
#   make e2e-kind PYTEST_ARGS='-k drift'  # some of them
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${KIND_CLUSTER:=backscroll-e2e}" "${KIND_NODE_IMAGE:=}" "${PYTHON:=.venv/bin/python}"
for tool in kind docker; do
  command -v "$tool" >/dev/null || { echo "e2e-kind needs $tool (https://kind.sigs.k8s.io)" >&2; exit 1; }
done
# The pinned kubectl (and KWOK, which the scenarios' fake nodes need): cached by tests/cluster/build.sh.
bin=$(bash tests/cluster/build.sh | tail -1)
work=$(mktemp -d)
trap 'kind delete cluster --name "$KIND_CLUSTER" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

kind create cluster --name "$KIND_CLUSTER" --wait 180s --kubeconfig "$work/kubeconfig" \
  ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}
# tests/operator puts a recording proxy between the operator and the API server; it serves with a
# certificate the cluster's CA signs, as ours does.
docker cp "$KIND_CLUSTER-control-plane:/etc/kubernetes/pki/ca.key" "$work/ca.key"
# Workloads go to KWOK's nodes, as on ours (the scenarios' gates are node labels there): kind's
# own node keeps the control-plane taint a single-node kind cluster removes.
"$bin/kubectl" --kubeconfig "$work/kubeconfig" taint node "$KIND_CLUSTER-control-plane" \
  node-role.kubernetes.io/control-plane=:NoSchedule --overwrite

BACKSCROLL_TEST_KUBECONFIG="$work/kubeconfig" BACKSCROLL_TEST_CA_KEY="$work/ca.key" \
  "$PYTHON" -m pytest -q -m "not own_control_plane" tests/cluster tests/operator ${PYTEST_ARGS:-}
echo "e2e-kind: the control-plane suites passed on kind ($KIND_CLUSTER)"
