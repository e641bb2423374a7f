"""The Kubernetes emulator behaves like an API server where the operator and kubectl rely on it:
the real kubectl end to end (discovery, Tables with the CRD's printer columns, apply, describe,
wait, scale, set image, delete), and server-side apply's semantics over plain HTTP."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
import yaml

from .conftest import NS
from .emulator import CRD_FILE, GROUP, PLURAL, VERSION, jsonpath
from .kubectl import KubectlError

SIDX = f"/apis/{GROUP}/{VERSION}/namespaces/{NS}/{PLURAL}"
DEPLOY = f"/apis/apps/v1/namespaces/{NS}/deployments"
EVENTS = f"/api/v1/namespaces/{NS}/events"
MERGE = {"Content-Type": "application/merge-patch+json"}
APPLY = {"Content-Type": "application/apply-patch+yaml"}
SAMPLE = "k8s/samples/searchindex.yaml"
CRD = yaml.safe_load(CRD_FILE.read_text())
COLUMNS = CRD["spec"]["versions"][0]["additionalPrinterColumns"]


@pytest.fixture
def http(cluster):
    with httpx.Client(base_url=cluster.url, timeout=20) as client:
        yield client


def searchindex(name: str = "search", **spec) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "SearchIndex", "metadata": {"name": name},
            "spec": {"image": "backscroll:1", "database": {"secretRef": {"name": "db"}}, **spec}}


def deployment(name: str = "web", containers: list | None = None, replicas: int | None = 2, **meta) -> dict:
    spec = {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": containers or [{"name": "c", "image": "nginx:1"}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, **meta}, "spec": spec}


def apply(http, path: str, body: dict, manager: str = "test", force: bool = False, as_yaml: bool = False):
    params = {"fieldManager": manager, **({"force": "true"} if force else {})}
    content = yaml.safe_dump(body) if as_yaml else json.dumps(body)
    return http.patch(f"{path}/{body['metadata']['name']}", content=content, params=params, headers=APPLY)


def set_status(http, name: str, status: dict) -> dict:
    return http.patch(f"{SIDX}/{name}/status", json={"status": status}, headers=MERGE).raise_for_status().json()


def ready(status: str = "True") -> dict:
    return {"type": "Ready", "status": status, "reason": "Serving", "message": "search answers",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}


def owners(obj: dict) -> dict[str, set[str]]:
    """manager -> the dotted fields it owns (keyed-list items as [key])."""
    from .emulator import fields_from_v1
    out = {}
    for entry in obj["metadata"].get("managedFields") or []:
        out[entry["manager"]] = {".".join(p) for p in fields_from_v1(entry["fieldsV1"])}
    return out


def header(table: str) -> list[str]:
    return table.splitlines()[0].split()


def rows(table: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in table.splitlines()[1:]}


# --- lists, discovery, Tables --------------------------------------------------------------------

def test_lists_carry_kind_api_version_and_resource_version(http):
    http.post(SIDX, json=searchindex()).raise_for_status()
    body = http.get(SIDX).raise_for_status().json()
    assert body["kind"] == "SearchIndexList" and body["apiVersion"] == f"{GROUP}/{VERSION}"
    assert int(body["metadata"]["resourceVersion"]) >= int(body["items"][0]["metadata"]["resourceVersion"])
    assert http.get("/api/v1/namespaces").json()["kind"] == "NamespaceList"
    resources = {r["name"]: r for r in http.get(f"/apis/{GROUP}/{VERSION}").json()["resources"]}
    names = CRD["spec"]["names"]
    assert resources[PLURAL]["shortNames"] == names["shortNames"]
    assert resources[PLURAL]["categories"] == names["categories"]
    assert resources[PLURAL]["singularName"] == names["singular"] and f"{PLURAL}/status" in resources
    scale = {r["name"]: r for r in http.get("/apis/apps/v1").json()["resources"]}["deployments/scale"]
    assert (scale["group"], scale["kind"]) == ("autoscaling", "Scale")
    assert http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD['metadata']['name']}") \
        .json()["spec"]["names"] == names


def test_get_prints_the_crds_columns_by_plural_short_name_and_category(kubectl, http):
    kubectl("apply", "-f", SAMPLE)
    set_status(http, "search", {"mode": "hybrid", "model": "e5", "coverage": "100%", "conditions": [ready()]})
    wanted = ["NAME"] + [c["name"].upper() for c in COLUMNS if not c.get("priority")]
    assert wanted[:6] == ["NAME", "MODE", "MODEL", "COVERAGE", "READY", "AGE"]
    for what in ("searchindexes", "sidx", "searchindex.search.backscroll.dev", "backscroll"):
        table = kubectl("get", what)
        assert header(table) == wanted, what
        name, mode, model, coverage, is_ready, age = rows(table)["search"][:6]
        assert (name, mode, model, coverage, is_ready) == ("search", "hybrid", "e5", "100%", "True")
        assert age[-1] in "smhd" and age[:-1].isdigit()
    wide = kubectl("get", "sidx", "-o", "wide")
    assert header(wide) == ["NAME"] + [c["name"].upper() for c in COLUMNS]
    assert header(kubectl("get", "sidx", "search")) == wanted
    assert kubectl("get", "sidx", "search", "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}") == "True"
    as_yaml = yaml.safe_load(kubectl("get", "sidx", "search", "-o", "yaml"))
    assert as_yaml["kind"] == "SearchIndex" and as_yaml["status"]["mode"] == "hybrid"
    listed = kubectl.json("get", "sidx")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["search"]


def test_builtin_tables(kubectl, http):
    http.post(DEPLOY, json=deployment()).raise_for_status()
    http.patch(f"{DEPLOY}/web/status", json={"status": {"readyReplicas": 1, "updatedReplicas": 2,
                                                         "availableReplicas": 1}}, headers=MERGE).raise_for_status()
    table = kubectl("get", "deploy", "-o", "wide")
    assert header(table) == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert rows(table)["web"][:4] == ["web", "1/2", "2", "1"] and rows(table)["web"][5:] == ["c", "nginx:1", "app=web"]
    assert header(kubectl("get", "ns")) == ["NAME", "AGE"]


def test_jsonpath_evaluator_covers_printer_column_paths():
    obj = {"status": {"conditions": [{"type": "Progressing", "status": "False"}, {"type": "Ready", "status": "True"}],
                      "models": [{"model": "a"}, {"model": "b"}]}}
    assert jsonpath(obj, '.status.conditions[?(@.type=="Ready")].status') == ["True"]
    assert jsonpath(obj, ".status.conditions[?(@.type!='Ready')].type") == ["Progressing"]
    assert jsonpath(obj, ".status.models[*].model") == ["a", "b"]
    assert jsonpath(obj, "{.status.models[1].model}") == ["b"]
    assert jsonpath(obj, ".status.missing") == []


# --- describe, wait ------------------------------------------------------------------------------

def event(name: str, obj: dict, reason: str) -> dict:
    meta = obj["metadata"]
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"],
                               "namespace": NS, "uid": meta["uid"]},
            "reason": reason, "message": f"{reason} on {meta['name']}", "type": "Normal", "count": 1,
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z",
            "source": {"component": "backscroll-operator"}}


def test_describe_shows_conditions_and_only_its_own_events(kubectl, http):
    mine = http.post(SIDX, json=searchindex("search")).raise_for_status().json()
    other = http.post(SIDX, json=searchindex("search-other")).raise_for_status().json()
    for n, (obj, reason) in enumerate([(mine, "MigrationStarted"), (other, "OtherObjectsEvent"), (mine, "Rolled")]):
        http.post(EVENTS, json=event(f"e{n}", obj, reason)).raise_for_status()
    set_status(http, "search", {"mode": "lexical", "conditions": [ready("False") | {"reason": "Backfilling"}]})
    out = kubectl("describe", "sidx", "search")
    assert "Type:                  Ready" in out and "Backfilling" in out
    events = out.split("Events:")[1]
    assert "MigrationStarted" in events and "Rolled" in events and "OtherObjectsEvent" not in events
    selected = http.get(EVENTS, params={"fieldSelector": f"involvedObject.uid={other['metadata']['uid']},"
                                                         "involvedObject.kind=SearchIndex"}).json()["items"]
    assert [e["reason"] for e in selected] == ["OtherObjectsEvent"]
    assert [i["metadata"]["name"] for i in http.get(SIDX, params={"fieldSelector": "metadata.name=search"}).json()["items"]] \
        == ["search"]
    listed = kubectl("get", "events", "--field-selector", "involvedObject.name=search-other")
    assert header(listed) == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert "searchindex/search-other" in listed and "MigrationStarted" not in listed


def later(seconds: float, action) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(seconds), action()), daemon=True)
    thread.start()
    return thread


def test_wait_returns_when_a_status_patch_meets_the_condition(kubectl, http):
    http.post(SIDX, json=searchindex()).raise_for_status()
    set_status(http, "search", {"mode": "degraded", "conditions": [ready("False")]})
    thread = later(1.0, lambda: set_status(http, "search", {"mode": "hybrid", "conditions": [ready("True")]}))
    out = kubectl("wait", "--for=condition=Ready", "sidx/search", "--timeout=30s")
    assert "condition met" in out
    thread.join()
    assert "condition met" in kubectl("wait", "--for=jsonpath={.status.mode}=hybrid", "sidx/search", "--timeout=30s")
    done = kubectl.run("wait", "--for=jsonpath={.status.mode}=lexical", "sidx/search", "--timeout=1s")
    assert done.returncode != 0 and "timed out" in done.stderr


# --- apply, scale, set image, patch --------------------------------------------------------------

def test_kubectl_apply_client_side_creates_then_finds_nothing_to_change(kubectl, http, tmp_path):
    manifest = tmp_path / "app.yaml"
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"}, "data": {"uri": "cG9zdGdyZXM="}}
    manifest.write_text(yaml.safe_dump_all([deployment(), secret]))
    assert "created" in kubectl("apply", "-f", SAMPLE)
    assert "deployment.apps/web created" in kubectl("apply", "-f", str(manifest))
    version = http.get(f"{DEPLOY}/web").json()["metadata"]["resourceVersion"]
    out = kubectl("apply", "-f", SAMPLE, "-f", str(manifest))
    assert out.count("unchanged") == 3, out
    assert http.get(f"{DEPLOY}/web").json()["metadata"]["resourceVersion"] == version
    # A change: kubectl sends a strategic merge patch (builtin) or a merge patch (SearchIndex).
    changed = deployment(containers=[{"name": "c", "image": "nginx:2"}, {"name": "side", "image": "busybox"}])
    manifest.write_text(yaml.safe_dump(changed))
    assert "configured" in kubectl("apply", "-f", str(manifest))
    live = http.get(f"{DEPLOY}/web").json()
    assert [(c["name"], c["image"]) for c in live["spec"]["template"]["spec"]["containers"]] == \
        [("c", "nginx:2"), ("side", "busybox")]
    assert live["metadata"]["generation"] == 2
    # The CRD file, applied as an installation would: accepted, nothing to change.
    assert "unchanged" in kubectl("apply", "-f", str(CRD_FILE))


def test_kubectl_apply_server_side(kubectl, http):
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", SAMPLE)
    live = http.get(f"{SIDX}/search").json()
    assert [(e["manager"], e["operation"]) for e in live["metadata"]["managedFields"]] == [("kubectl", "Apply")]
    kubectl("apply", "--server-side", "-f", SAMPLE)
    assert http.get(f"{SIDX}/search").json()["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
    kubectl("apply", "--server-side", "-f", str(CRD_FILE))


def test_scale_set_image_and_patch_record_their_managers(kubectl, http):
    apply(http, DEPLOY, deployment(replicas=2), manager="operator").raise_for_status()
    assert "scaled" in kubectl("scale", "deployment", "web", "--replicas=5")
    assert http.get(f"{DEPLOY}/web/scale").json()["spec"]["replicas"] == 5
    assert "image updated" in kubectl("set", "image", "deployment/web", "c=nginx:2")
    kubectl("patch", "deployment", "web", "--type", "merge", "-p", '{"metadata": {"labels": {"tier": "web"}}}')
    live = http.get(f"{DEPLOY}/web").json()
    assert live["spec"]["replicas"] == 5 and live["metadata"]["labels"] == {"tier": "web"}
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    fields = owners(live)
    scaler = next(m for m, f in fields.items() if "f:spec.f:replicas" in f)
    assert scaler.startswith("kubectl") and "f:spec.f:replicas" not in fields["operator"]
    # The operator's next apply of 2 replicas collides with the scaler, unless forced.
    conflict = apply(http, DEPLOY, deployment(replicas=2), manager="operator")
    assert conflict.status_code == 409 and conflict.json()["reason"] == "Conflict"
    assert f'conflict with "{scaler}"' in conflict.json()["message"] and ".spec.replicas" in conflict.json()["message"]
    # Applying without replicas leaves them to the scaler (how an operator yields to an HPA).
    yielding = deployment(replicas=None, containers=[{"name": "c", "image": "nginx:2"}])
    apply(http, DEPLOY, yielding, manager="operator").raise_for_status()
    assert http.get(f"{DEPLOY}/web").json()["spec"]["replicas"] == 5


# --- deletion ------------------------------------------------------------------------------------

def test_delete_with_finalizers_waits_for_them(kubectl, http):
    body = searchindex()
    body["metadata"]["finalizers"] = ["search.backscroll.dev/cleanup"]
    http.post(SIDX, json=body).raise_for_status()
    out = kubectl("delete", "sidx", "search", "--wait=false")
    assert "deleted" in out
    live = http.get(f"{SIDX}/search").raise_for_status().json()
    assert live["metadata"]["deletionTimestamp"]
    kubectl("delete", "sidx", "search", "--wait=false")  # again: still there, still deleting
    assert http.get(f"{SIDX}/search").json()["metadata"]["deletionTimestamp"] == live["metadata"]["deletionTimestamp"]
    with http.stream("GET", SIDX, params={"watch": "true", "resourceVersion": live["metadata"]["resourceVersion"],
                                          "timeoutSeconds": "5"}) as watch:
        kubectl("patch", "sidx", "search", "--type", "merge", "-p", '{"metadata": {"finalizers": null}}')
        first = json.loads(next(watch.iter_lines()))
    assert first["type"] == "DELETED" and first["object"]["metadata"]["name"] == "search"
    assert http.get(f"{SIDX}/search").status_code == 404
    assert "NotFound" in kubectl.run("get", "sidx", "search").stderr


def owned_by(obj: dict) -> list[dict]:
    return [{"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
             "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]


def test_garbage_collection_removes_what_the_deleted_object_owned(kubectl, http):
    owner = http.post(SIDX, json=searchindex()).raise_for_status().json()
    child = http.post(DEPLOY, json=deployment("api", ownerReferences=owned_by(owner))).raise_for_status().json()
    grandchild = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "api-config", "ownerReferences": owned_by(child)}}
    http.post(f"/api/v1/namespaces/{NS}/configmaps", json=grandchild).raise_for_status()
    http.post(DEPLOY, json=deployment("unrelated")).raise_for_status()
    kubectl("delete", "sidx", "search", "--timeout=20s")
    assert http.get(f"{DEPLOY}/api").status_code == 404
    assert http.get(f"/api/v1/namespaces/{NS}/configmaps/api-config").status_code == 404
    assert http.get(f"{DEPLOY}/unrelated").status_code == 200

    owner = http.post(SIDX, json=searchindex()).raise_for_status().json()
    http.post(DEPLOY, json=deployment("api", ownerReferences=owned_by(owner))).raise_for_status()
    kubectl("delete", "sidx", "search", "--cascade=orphan", "--timeout=20s")
    orphan = http.get(f"{DEPLOY}/api").raise_for_status().json()
    assert not orphan["metadata"].get("ownerReferences")


# --- server-side apply over HTTP -----------------------------------------------------------------

def test_apply_creates_and_a_repeated_apply_writes_nothing(cluster, http):
    body = deployment(containers=[{"name": "c", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}])
    created = apply(http, DEPLOY, body, as_yaml=True)
    assert created.status_code == 201
    obj = created.json()
    assert obj["metadata"]["generation"] == 1 and obj["metadata"]["uid"]
    assert [(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]] == [("test", "Apply")]
    changes = len(cluster.emulator.changes)
    with http.stream("GET", DEPLOY, params={"watch": "true", "resourceVersion": obj["metadata"]["resourceVersion"],
                                            "timeoutSeconds": "1"}) as watch:
        again = apply(http, DEPLOY, body)
        assert again.status_code == 200
        assert list(watch.iter_lines()) == [], "a no-op apply sent a watch event"
    assert again.json()["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    assert again.json()["metadata"]["generation"] == 1
    assert cluster.emulator.changes[changes:] == []
    assert apply(http, DEPLOY, body, manager="").status_code == 400  # fieldManager is required


def test_apply_removes_what_the_same_manager_no_longer_applies(http):
    body = deployment(containers=[{"name": "c", "image": "nginx:1",
                                   "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}])
    body["metadata"]["labels"] = {"app": "web", "old": "yes"}
    apply(http, DEPLOY, body).raise_for_status()
    http.patch(f"{DEPLOY}/web", json={"metadata": {"labels": {"theirs": "x"}}}, headers=MERGE).raise_for_status()
    body["metadata"]["labels"] = {"app": "web"}
    body["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    live = apply(http, DEPLOY, body).raise_for_status().json()
    assert live["metadata"]["labels"] == {"app": "web", "theirs": "x"}, "another manager's label stays"
    assert live["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]
    assert live["metadata"]["generation"] == 2  # the spec changed; the labels alone would not count


def test_apply_merges_keyed_lists_between_managers(http):
    apply(http, DEPLOY, deployment(containers=[
        {"name": "api", "image": "api:1", "env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 80}],
         "volumeMounts": [{"name": "data", "mountPath": "/data"}]}])).raise_for_status()
    sidecar = deployment(replicas=None, containers=[
        {"name": "api", "env": [{"name": "FROM_SIDECAR", "value": "1"}], "ports": [{"containerPort": 9090}]},
        {"name": "proxy", "image": "proxy:1"}])
    sidecar["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    live = apply(http, DEPLOY, sidecar, manager="injector").raise_for_status().json()
    containers = {c["name"]: c for c in live["spec"]["template"]["spec"]["containers"]}
    assert set(containers) == {"api", "proxy"} and containers["api"]["image"] == "api:1"
    assert [e["name"] for e in containers["api"]["env"]] == ["A", "FROM_SIDECAR"]
    assert [p["containerPort"] for p in containers["api"]["ports"]] == [80, 9090]
    assert live["spec"]["template"]["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}]
    # The injector stops applying its container: only its own parts go.
    sidecar["spec"]["template"]["spec"]["containers"] = [sidecar["spec"]["template"]["spec"]["containers"][0]]
    live = apply(http, DEPLOY, sidecar, manager="injector").raise_for_status().json()
    assert [c["name"] for c in live["spec"]["template"]["spec"]["containers"]] == ["api"]
    # Atomic lists are replaced whole: a container's args.
    args = deployment(replicas=None, containers=[{"name": "api", "args": ["--a"]}])
    apply(http, DEPLOY, args, manager="args").raise_for_status()
    args["spec"]["template"]["spec"]["containers"][0]["args"] = ["--b"]
    live = apply(http, DEPLOY, args, manager="args").raise_for_status().json()
    assert live["spec"]["template"]["spec"]["containers"][0]["args"] == ["--b"]


def test_apply_conflicts_unless_forced_and_force_takes_ownership(http):
    apply(http, DEPLOY, deployment(containers=[{"name": "c", "image": "nginx:1"}]), manager="first").raise_for_status()
    theirs = deployment(replicas=None, containers=[{"name": "c", "image": "nginx:2"}])
    refused = apply(http, DEPLOY, theirs, manager="second")
    assert refused.status_code == 409 and refused.json()["reason"] == "Conflict"
    assert 'conflict with "first"' in refused.json()["message"]
    assert ".spec.template.spec.containers[name=\"c\"].image" in refused.json()["message"].replace('{"name":"c"}', 'name="c"')
    assert http.get(f"{DEPLOY}/web").json()["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1"
    # The same value is no conflict: both own it.
    apply(http, DEPLOY, deployment(replicas=2, containers=[{"name": "c"}]), manager="second").raise_for_status()
    theirs["spec"]["replicas"] = 2
    live = apply(http, DEPLOY, theirs, manager="second", force=True).raise_for_status().json()
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    image = 'f:spec.f:template.f:spec.f:containers.k:{"name":"c"}.f:image'
    assert image in owners(live)["second"] and image not in owners(live)["first"]
    assert "f:spec.f:replicas" in owners(live)["first"] and "f:spec.f:replicas" in owners(live)["second"]


def test_status_writes_count_no_generation_and_main_writes_keep_status(http):
    created = http.post(SIDX, json=searchindex() | {"status": {"mode": "ignored"}}).raise_for_status().json()
    assert "status" not in created  # the main endpoint sets no status where /status exists
    assert set_status(http, "search", {"mode": "hybrid"})["metadata"]["generation"] == 1
    same = http.patch(f"{SIDX}/search", json={"status": {"mode": "lexical"}}, headers=MERGE).json()
    assert same["status"] == {"mode": "hybrid"} and same["metadata"]["generation"] == 1
    spec = http.patch(f"{SIDX}/search", json={"spec": {"image": "backscroll:2"}}, headers=MERGE).json()
    assert spec["metadata"]["generation"] == 2
    put = dict(spec, spec=spec["spec"] | {"image": "backscroll:3"})
    replaced = http.put(f"{SIDX}/search", json=put).raise_for_status().json()
    assert replaced["metadata"]["generation"] == 3 and replaced["status"] == {"mode": "hybrid"}
    stale = http.put(f"{SIDX}/search", json=put)  # its resourceVersion is no longer current
    assert stale.status_code == 409
    test_op = [{"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
               {"op": "replace", "path": "/spec/image", "value": "x"}]
    assert http.patch(f"{SIDX}/search", json=test_op, headers={"Content-Type": "application/json-patch+json"}) \
        .status_code == 422


def test_label_selectors_on_lists_and_watches(http):
    for name, labels in (("a", {"tier": "web", "env": "prod"}), ("b", {"tier": "db"}), ("c", {})):
        http.post(DEPLOY, json=deployment(name, labels=labels)).raise_for_status()

    def names(selector):
        return [i["metadata"]["name"] for i in http.get(DEPLOY, params={"labelSelector": selector}).json()["items"]]
    assert names("tier=web") == ["a"]
    assert names("tier!=web") == ["b", "c"]
    assert names("tier in (web,db)") == ["a", "b"]
    assert names("tier notin (web)") == ["b", "c"]
    assert names("env") == ["a"] and names("!env") == ["b", "c"]
    assert names("tier=web,env=prod") == ["a"]
    with http.stream("GET", DEPLOY, params={"watch": "true", "labelSelector": "tier=db", "timeoutSeconds": "1"}) as w:
        http.post(DEPLOY, json=deployment("d", labels={"tier": "web"})).raise_for_status()
        events = [json.loads(line) for line in w.iter_lines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "b")]


def test_kubectl_errors_carry_both_streams(kubectl):
    with pytest.raises(KubectlError) as failed:
        kubectl("get", "sidx", "missing")
    assert failed.value.code != 0 and "NotFound" in str(failed.value) and "--- stderr" in str(failed.value)


def test_a_missing_kubectl_fails_loudly(monkeypatch):
    from . import kubectl as module
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(module, "KUBECTL", "/nonexistent/kubectl")
    with pytest.raises(RuntimeError, match="need the `kubectl` binary"):
        module.kubectl_binary()


def test_kubectl_create_secret_and_configmap_sent_as_protobuf(kubectl, http):
    kubectl("create", "secret", "generic", "db", "--from-literal=uri=postgresql://u:p@db/x", "--from-literal=b=2")
    kubectl("create", "configmap", "settings", "--from-literal=k=v")
    secret = http.get(f"/api/v1/namespaces/{NS}/secrets/db").raise_for_status().json()
    assert secret["data"] == {"uri": "cG9zdGdyZXNxbDovL3U6cEBkYi94", "b": "Mg=="}
    assert http.get(f"/api/v1/namespaces/{NS}/configmaps/settings").json()["data"] == {"k": "v"}
    assert "already exists" in kubectl.run("create", "secret", "generic", "db", "--from-literal=a=1").stderr
