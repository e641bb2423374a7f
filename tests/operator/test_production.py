"""Issue 22's production settings, without a cluster: availability (budgets, an HPA, resources,
spreading, scheduling, a startup probe), the embeddings server's model source, NetworkPolicies and
hibernation, in the builders, spec.py and the CRD's schema alike."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from openapi_schema_validator import OAS30Validator

from backscroll_operator import builders, rollout
from backscroll_operator.names import Owner, model_slug
from backscroll_operator.spec import SpecError, parse
from backscroll_operator.status import DeploymentState, Facts, JobState, derive

ROOT = Path(__file__).resolve().parents[2]
OWNER = Owner(name="search", namespace="team", uid="uid-1")
BASE = {"image": "backscroll:1", "database": {"secretRef": {"name": "db"}}}
IN_CLUSTER = {**BASE, "embeddings": {"model": "e5", "dimensions": 384}}


def steady(spec) -> rollout.Plan:
    return rollout.plan(spec, rollout.Observed(migrated=True, backfilled=frozenset(
        [spec.embeddings.model] if spec.embeddings else [])))


def children(body) -> dict[tuple[str, str], dict | None]:
    spec = parse(body)
    return {(r, n): m for r, n, m in builders.desired(OWNER, spec, steady(spec))}


def pod_of(manifest) -> dict:
    return manifest["spec"]["template"]["spec"]


@pytest.fixture(scope="module")
def schema() -> dict:
    crd = yaml.safe_load((ROOT / "k8s/base/crd/searchindexes.search.backscroll.dev.yaml").read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def body(spec: dict) -> dict:
    return {"apiVersion": "search.backscroll.dev/v1alpha1", "kind": "SearchIndex",
            "metadata": {"name": "search"}, "spec": spec}


# --- availability -------------------------------------------------------------------------------

def test_a_budget_for_each_deployment_of_two_or_more_replicas():
    got = children({**IN_CLUSTER, "worker": {"replicas": 3}, "embeddings": {
        **IN_CLUSTER["embeddings"], "server": {"replicas": 2}}})
    server = builders.embeddings_name(OWNER, "e5")
    budgets = {n: m for (r, n), m in got.items() if r == "poddisruptionbudgets"}
    assert set(budgets) == {"search-api", "search-worker", server} and all(budgets.values())
    for name, budget in budgets.items():
        assert budget["apiVersion"] == "policy/v1" and budget["spec"]["minAvailable"] == 1
    assert budgets["search-api"]["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/instance": "search", "app.kubernetes.io/component": "api"}
    # Each server's budget covers its own model's pods only (two run during a rollout).
    assert budgets[server]["spec"]["selector"]["matchLabels"][builders.MODEL_LABEL] == model_slug("e5")
    # One replica: a budget of 1 would block every drain, so none.
    got = children({**BASE, "api": {"replicas": 1}})
    assert got[("poddisruptionbudgets", "search-api")] is None


def test_autoscaling_makes_an_hpa_and_leaves_replicas_to_it():
    got = children({**BASE, "api": {"replicas": 5, "autoscaling": {"minReplicas": 3, "maxReplicas": 8,
                                                                   "targetCPUUtilizationPercentage": 60}}})
    hpa = got[("horizontalpodautoscalers", "search-api")]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "search-api"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 8)
    assert hpa["spec"]["metrics"][0]["resource"]["target"] == {"type": "Utilization", "averageUtilization": 60}
    assert "replicas" not in got[("deployments", "search-api")]["spec"]
    assert got[("poddisruptionbudgets", "search-api")]["spec"]["minAvailable"] == 1  # minReplicas 3
    assert children(BASE)[("horizontalpodautoscalers", "search-api")] is None
    with pytest.raises(SpecError, match="spec.api.autoscaling"):
        parse({**BASE, "api": {"autoscaling": {"minReplicas": 4, "maxReplicas": 2}}})


def test_default_resources_per_component_and_given_ones_as_given():
    got = children(IN_CLUSTER)
    resources = {n: pod_of(m)["containers"][0]["resources"] for (r, n), m in got.items() if r == "deployments" and m}
    assert resources["search-api"] == builders.DEFAULT_RESOURCES["api"]
    assert resources["search-worker"] == builders.DEFAULT_RESOURCES["worker"]
    assert resources[builders.embeddings_name(OWNER, "e5")] == builders.DEFAULT_RESOURCES["server"]
    for r in resources.values():
        assert r["requests"] and r["limits"], "Burstable, not BestEffort"
    given = parse({**BASE, "api": {"resources": {"requests": {"cpu": 2, "memory": "1Gi"}}}})
    assert pod_of(builders.api_deployment(OWNER, given, steady(given)))["containers"][0]["resources"] == {
        "requests": {"cpu": "2", "memory": "1Gi"}}


@pytest.mark.parametrize("resources", [{"requests": {"cpu": "lots"}}, {"limits": {"memory": "1 GB"}},
                                       {"requests": {"cpu": "-"}}])
def test_a_quantity_that_is_none_is_refused_by_the_crd_and_the_operator(schema, resources):
    spec = {**BASE, "api": {"resources": resources}}
    assert not OAS30Validator(schema).is_valid(body(spec))
    with pytest.raises(SpecError, match="spec.api.resources"):
        parse(spec)
    good = {**BASE, "api": {"resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": 1}}}}
    OAS30Validator(schema).validate(body(good))
    parse(good)


def test_deployments_spread_across_nodes_and_zones_by_default():
    got = children(IN_CLUSTER)
    for (resource, name), manifest in got.items():
        if resource != "deployments" or manifest is None:
            continue
        spread = pod_of(manifest)["topologySpreadConstraints"]
        assert [c["topologyKey"] for c in spread] == ["kubernetes.io/hostname", "topology.kubernetes.io/zone"]
        labels = manifest["spec"]["template"]["metadata"]["labels"]
        for constraint in spread:
            assert constraint["whenUnsatisfiable"] == "ScheduleAnyway" and constraint["maxSkew"] == 1
            assert constraint["labelSelector"]["matchLabels"].items() <= labels.items(), name
    custom = [{"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]
    none = children({**BASE, "api": {"pod": {"topologySpreadConstraints": []}}})
    assert "topologySpreadConstraints" not in pod_of(none[("deployments", "search-api")])
    mine = children({**BASE, "pod": {"topologySpreadConstraints": custom}})
    assert pod_of(mine[("deployments", "search-api")])["topologySpreadConstraints"] == custom


def test_pod_settings_merge_spec_pod_under_the_components():
    spec = parse({**IN_CLUSTER,
                  "pod": {"imagePullSecrets": ["regcred"], "nodeSelector": {"pool": "general"},
                          "tolerations": [{"key": "a", "operator": "Exists"}], "annotations": {"team": "search"},
                          "labels": {"cost-center": "42", "app.kubernetes.io/component": "hijack"}},
                  "api": {"pod": {"nodeSelector": {"pool": "web"}, "imagePullSecrets": ["api-cred"],
                                  "affinity": {"nodeAffinity": {}}, "priorityClassName": "high"}},
                  "embeddings": {**IN_CLUSTER["embeddings"], "server": {"pod": {
                      "tolerations": [{"key": "gpu", "operator": "Exists"}]}}}})
    plan = steady(spec)
    api = builders.api_deployment(OWNER, spec, plan)
    pod = pod_of(api)
    assert pod["nodeSelector"] == {"pool": "web"}, "the component's map wins key by key"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}, {"name": "api-cred"}]
    assert pod["affinity"] == {"nodeAffinity": {}} and pod["priorityClassName"] == "high"
    meta = api["spec"]["template"]["metadata"]
    assert meta["labels"]["cost-center"] == "42"
    assert meta["labels"]["app.kubernetes.io/component"] == "api", "the operator's labels win"
    assert meta["annotations"]["team"] == "search"
    server = pod_of(builders.embeddings_deployment(OWNER, spec, spec.embeddings))
    assert server["tolerations"] == [{"key": "a", "operator": "Exists"}, {"key": "gpu", "operator": "Exists"}]
    # Jobs get spec.pod (the backfill and catch-up: the worker's too), and no spreading.
    for job in (builders.migration_job(OWNER, spec), builders.backfill_job(OWNER, spec, spec.embeddings)):
        assert pod_of(job)["imagePullSecrets"] == [{"name": "regcred"}]
        assert "topologySpreadConstraints" not in pod_of(job)


def test_the_api_has_a_startup_probe_before_liveness():
    container = pod_of(children(BASE)[("deployments", "search-api")])["containers"][0]
    startup = container["startupProbe"]
    assert startup["httpGet"] == container["livenessProbe"]["httpGet"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 60


# --- the embeddings server's model source --------------------------------------------------------

def server_container(server: dict):
    spec = parse({**BASE, "embeddings": {"model": "e5", "dimensions": 384, "server": server}})
    deployment = builders.embeddings_deployment(OWNER, spec, spec.embeddings)
    pod = pod_of(deployment)
    return pod, pod["containers"][0], {e["name"]: e for e in pod["containers"][0]["env"]}


def test_model_source_mirror_and_token():
    _, _, env = server_container({"modelSource": {"mirrorUrl": "https://hf-mirror.example/",
                                                  "tokenSecretRef": {"name": "hf", "key": "token"}}})
    assert env["HF_ENDPOINT"]["value"] == "https://hf-mirror.example"
    assert env["HF_TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "hf", "key": "token"}}
    assert env["HOME"]["value"] == env["HF_HOME"]["value"] == "/data" and "HF_HUB_OFFLINE" not in env


def test_model_source_volume_is_read_only_and_offline():
    pod, container, env = server_container({"modelSource": {"volume": {"claimName": "weights"}}})
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["model-cache"]["persistentVolumeClaim"] == {"claimName": "weights", "readOnly": True}
    data = next(m for m in container["volumeMounts"] if m["mountPath"] == "/data")
    assert data["readOnly"] is True
    assert env["HF_HUB_OFFLINE"]["value"] == "1" and env["HOME"]["value"] == "/tmp"
    with pytest.raises(SpecError, match="modelCache"):
        parse({**BASE, "embeddings": {"model": "e5", "dimensions": 384, "server": {
            "modelSource": {"volume": {"claimName": "w"}}, "modelCache": {"claimName": "c"}}}})


def test_the_server_listens_above_1024_behind_its_services_port():
    pod, container, _ = server_container({"port": 80})
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    spec = parse(IN_CLUSTER)
    service = builders.embeddings_service(OWNER, spec, spec.embeddings)
    assert service["spec"]["ports"][0]["port"] == 80 and service["spec"]["ports"][0]["targetPort"] == "http"
    assert service["spec"]["selector"][builders.MODEL_LABEL] == model_slug("e5"), "its own model's pods only"
    assert pod["securityContext"]["fsGroup"] == 1000


# --- NetworkPolicies ------------------------------------------------------------------------------

def test_only_this_index_s_embedding_callers_reach_its_servers():
    got = children(IN_CLUSTER)
    policy = got[("networkpolicies", "search-embeddings")]
    assert policy["apiVersion"] == "networking.k8s.io/v1" and policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/instance": "search",
                                                            "app.kubernetes.io/component": "embeddings"}
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": builders.SERVER_PORT}]
    (source,) = rule["from"]
    assert set(source) == {"podSelector"}, "pods of this namespace only (no namespaceSelector, no ipBlock)"
    assert source["podSelector"]["matchLabels"] == {"app.kubernetes.io/instance": "search"}
    (expression,) = source["podSelector"]["matchExpressions"]
    assert sorted(expression["values"]) == ["api", "backfill", "catchup", "worker"]
    # ... and those pods carry the labels the rule matches.
    spec = parse(IN_CLUSTER)
    for manifest in (got[("deployments", "search-api")], got[("deployments", "search-worker")],
                     builders.backfill_job(OWNER, spec, spec.embeddings),
                     builders.catchup_job(OWNER, spec, spec.embeddings)):
        labels = manifest["spec"]["template"]["metadata"]["labels"]
        assert labels["app.kubernetes.io/instance"] == "search"
        assert labels["app.kubernetes.io/component"] in expression["values"]
    migrate = builders.migration_job(OWNER, spec)["spec"]["template"]["metadata"]["labels"]
    assert migrate["app.kubernetes.io/component"] not in expression["values"], "the migration never embeds"


def test_the_api_accepts_only_the_port_its_service_targets():
    got = children({**BASE, "api": {"service": {"port": 9090}}})
    policy = got[("networkpolicies", "search-api")]
    assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "api"
    assert policy["spec"]["ingress"] == [{"ports": [{"protocol": "TCP", "port": builders.API_PORT}]}]
    api = pod_of(got[("deployments", "search-api")])["containers"][0]
    assert [p["containerPort"] for p in api["ports"]] == [builders.API_PORT]
    assert got[("networkpolicies", "search-embeddings")] is None, "lexical: no server to guard"


def test_network_policies_can_be_turned_off():
    got = children({**IN_CLUSTER, "networkPolicy": {"enabled": False}})
    assert got[("networkpolicies", "search-api")] is None and got[("networkpolicies", "search-embeddings")] is None


# --- hibernation ----------------------------------------------------------------------------------

def test_hibernate_scales_everything_to_zero_without_hpa_or_budgets():
    got = children({**IN_CLUSTER, "hibernate": True, "api": {"autoscaling": {}},
                    "embeddings": {**IN_CLUSTER["embeddings"], "server": {"replicas": 2}}})
    deployments = {n: m for (r, n), m in got.items() if r == "deployments" and m}
    assert len(deployments) == 3
    assert {n: m["spec"]["replicas"] for n, m in deployments.items()} == {n: 0 for n in deployments}
    assert got[("horizontalpodautoscalers", "search-api")] is None
    assert not [n for (r, n), m in got.items() if r == "poddisruptionbudgets" and m]


def _facts(api_replicas: int) -> Facts:
    return Facts(migration=JobState("m", "succeeded"), api=DeploymentState("search-api", api_replicas, 0, True),
                 report=None, report_error="connection refused")


@pytest.mark.parametrize("spec_body,cause", [({**BASE, "hibernate": True}, "spec.hibernate"),
                                             ({**BASE, "api": {"replicas": 0}}, "spec.api.replicas is 0")])
def test_a_hibernated_index_reads_hibernated_not_api_not_ready(spec_body, cause):
    spec = parse(spec_body)
    status = derive(spec, _facts(0), 3, None, "2026-01-01T00:00:00Z", steady(spec))
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Hibernated")
    assert cause in ready["message"]
    assert status["mode"] == "hibernated", "neither hybrid nor degraded: nothing answers"
    awake = derive(parse(BASE), _facts(2), 3, None, "2026-01-01T00:00:00Z", steady(parse(BASE)))
    assert next(c for c in awake["conditions"] if c["type"] == "Ready")["reason"] == "ApiNotReady"


def test_hibernation_fields_in_the_crd(schema):
    spec = schema["properties"]["spec"]["properties"]
    assert spec["hibernate"]["default"] is False and spec["networkPolicy"]["properties"]["enabled"]["default"] is True
    OAS30Validator(schema).validate(body({**BASE, "hibernate": True}))
    assert not OAS30Validator(schema).is_valid(body({**BASE, "hibernate": "yes"}))
