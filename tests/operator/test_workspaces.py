"""SearchWorkspace on the real control plane (issue 32): tenants as code, from `kubectl apply` to
tokens that work against the API, with no exec anywhere, and every lifecycle step a test.

The operator runs as the chart's ServiceAccount with the chart's Roles (the `operator` fixture; any
403 fails a test unless the test expects it). KWOK runs no container: the test plays each Job the
operator creates by running its container's command here (`backscroll workspaces ...`, the
arguments as created, the environment resolved from the cluster's Secrets as the kubelet would)
against a real migrated PostgreSQL (`db_url`), while its pod is held at a gate; then it opens the
gate and the Job completes. Tokens are used with real requests against the real app on that
database (tests.world.client)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import pytest

from backscroll_operator import workspaces as ws_
from tests.api.support import conversation_body
from tests.world import bearer, client, open_world

from .conftest import CHART, eventually, fail_pod, render_chart, report
from .test_scenarios import condition, searchindex

CRD = CHART / "crds" / "searchworkspaces.search.backscroll.dev.yaml"
INGEST, RUNTIME = "acme-slack-ingest", "acme-runtime"
ROOT = CHART.parents[1]


@pytest.fixture(scope="session")
def workspace_crd(control_plane, crd):
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))

    def established() -> bool:
        body = json.loads(control_plane.kubectl("get", f"crd/{ws_.CRD_NAME}", "-o", "json").stdout)
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (body.get("status") or {}).get("conditions") or [])
    eventually(established, timeout=120, interval=0.5)


def workspace(name: str = "acme", tokens: list[dict] | None = None, **spec) -> dict:
    return {"apiVersion": "search.backscroll.dev/v1alpha1", "kind": "SearchWorkspace", "metadata": {"name": name},
            "spec": {"indexRef": {"name": "search"}, "slug": "acme", "displayName": "Acme Corp",
                     "tokens": tokens if tokens is not None else [
                         {"name": "slack-connector", "kind": "ingest", "secret": {"name": INGEST}},
                         {"name": "concierge", "kind": "runtime", "agents": ["concierge"],
                          "secret": {"name": RUNTIME}}], **spec}}


def ready(api, name: str = "acme") -> dict:
    status = (api.get("searchworkspaces", name) or {}).get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})


def token_of(api, name: str, namespace: str | None = None, key: str = "token") -> str | None:
    secret = api.get("secrets", name, namespace)
    return base64.b64decode(secret["data"][key]).decode() if secret else None


def pending_job(api, component: str, exclude: set[str] = frozenset()) -> dict:
    return eventually(lambda: next(j for j in api.list("jobs", f"app.kubernetes.io/component={component}")
                                   if j["metadata"]["name"] not in exclude))


def play(api, job: dict, db_url: str, tmp_path, exit_code: int = 0) -> str:
    """The Job's container command, run here as the kubelet would run it (its env resolved from the
    Secrets it names), against the test's database; it must exit `exit_code`. Returns its output,
    which holds no secret."""
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["backscroll"] and container["args"][0] == "workspaces"
    env, secrets = {k: v for k, v in os.environ.items() if not k.startswith("BACKSCROLL_")}, []
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = token_of(api, ref["name"], key=ref["key"])
            secrets.append(env[item["name"]])
    env["BACKSCROLL_DATABASE_URL"] = db_url  # the database the Secret names, as this test reaches it
    done = subprocess.run([sys.executable, "-m", "backscroll.cli", *container["args"]], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    print(output)
    assert done.returncode == exit_code, output
    assert not [s for s in secrets if s and s in output + json.dumps(job)], "a secret in the Job or its output"
    return output


def complete(hold, api, job: dict) -> None:
    """The held pod runs (and, on KWOK, succeeds): the Job completes; the gate closes again."""
    hold.open()

    def done() -> bool:  # gone counts: a revoke Job goes with its SearchWorkspace once it succeeded
        live = api.get("jobs", job["metadata"]["name"])
        return live is None or bool((live.get("status") or {}).get("succeeded"))
    eventually(done)
    hold.close()


def works(db_url: str, ingest: str | None = None, runtime: str | None = None) -> dict[str, int]:
    """Real requests with each token: the ingest token writes a conversation, the runtime token
    opens a turn in it and calls search_history. The HTTP status of each."""
    out = {}
    with client(db_url) as http:
        if ingest is not None:
            r = http.post("/v1/conversations", headers=bearer(ingest), json=conversation_body(
                f"t-{len(ingest) % 97}-{ingest[-6:]}", "Rose Room offsite", agent="concierge", audience={"kind": "public"}))
            out["ingest"] = r.status_code
        if runtime is not None:
            world = open_world(db_url)
            try:  # a conversation of the agent to answer in (a runtime token writes none)
                world.workspaces["acme"] = world.conn.execute(
                    "select id from workspaces where slug = 'acme'").fetchone()["id"]
                conversation = world.conversation("acme", "concierge", "C-runtime", "runtime's room",
                                                  audience={"kind": "public"})
            finally:
                world.conn.close()
            r = http.post("/v1/turns", headers=bearer(runtime),
                          json={"agent": "concierge", "conversation_id": conversation})
            out["turn"] = r.status_code
            if r.status_code == 201:
                r = http.post("/v1/tools/search_history", headers=bearer(runtime),
                              json={"turn_id": r.json()["id"], "query": "Rose Room"})
                out["search_history"] = r.status_code
            else:
                out["search_history"] = r.status_code
    return out


@pytest.fixture
def indexed(api, status_server, gate, workspace_crd):
    """The SearchIndex `search` migrated (its Job held until the operator runs), and a gate for the
    pods of every later Job: `indexed()` returns the gate once MigrationsApplied."""
    hold = gate("workspace")

    def up(name: str = "search"):
        status_server.reports[name] = report("lexical")
        api.create("searchindexes", searchindex(name, embeddings=False, pod={"nodeSelector": hold.selector}))
        hold.open()
        eventually(lambda: condition(api, name, "MigrationsApplied").get("status") == "True")
        hold.close()
        return hold

    return up


def to_ready(api, hold, db_url, tmp_path, body: dict | None = None) -> str:
    api.create("searchworkspaces", body or workspace())
    job = pending_job(api, ws_.REGISTER)
    assert ready(api).get("reason") == "Registering" or eventually(lambda: ready(api).get("reason") == "Registering")
    assert api.get("secrets", INGEST) is None, "no token is delivered before it is registered"
    output = play(api, job, db_url, tmp_path)
    complete(hold, api, job)
    eventually(lambda: ready(api).get("status") == "True")
    return output


def test_a_searchworkspace_becomes_ready_and_its_tokens_work(api, operator, indexed, db_url, kubectl, tmp_path):
    # A workspace made by hand before (the old way): adopted, not duplicated.
    done = subprocess.run([sys.executable, "-m", "backscroll.cli", "workspaces", "create", "acme", "--name", "Old"],
                          env={**os.environ, "BACKSCROLL_DATABASE_URL": db_url}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    with operator():
        hold = indexed()
        output = to_ready(api, hold, db_url, tmp_path)
        assert "adopted workspace acme" in output and "renamed workspace acme: 'Old' -> 'Acme Corp'" in output
        ingest, runtime = token_of(api, INGEST), token_of(api, RUNTIME)
        assert ingest.startswith("bks_") and runtime.startswith("bks_") and ingest != runtime
        assert works(db_url, ingest, runtime) == {"ingest": 201, "turn": 201, "search_history": 200}
        # Each token is what it was declared: the ingest token cannot search, the runtime cannot write.
        assert works(db_url, ingest=runtime)["ingest"] == 403 and works(db_url, runtime=ingest)["turn"] == 403
        status = api.get("searchworkspaces", "acme")["status"]
        assert status["tokens"] == "2/2" and status["observedGeneration"] == 1
        assert [t["name"] for t in status["tokenStatus"]] == ["slack-connector", "concierge"]
        assert all(t["registeredAt"] for t in status["tokenStatus"])
        table = kubectl("get", "searchworkspaces")
        print(f"$ kubectl get searchworkspaces\n{table}")  # `pytest -s`: the walk-through's output
        assert table.split("\n")[0].split() == ["NAME", "INDEX", "SLUG", "TOKENS", "READY", "AGE"]
        assert table.split("\n")[1].split()[:5] == ["acme", "search", "acme", "2/2", "True"]
        reasons = [e["reason"] for e in api.events("acme") if e["involvedObject"]["kind"] == "SearchWorkspace"]
        assert "Registering" in reasons and "Ready" in reasons
        # Drift: a token Secret edited by hand is written back.
        api.patch("secrets", INGEST, {"data": {"token": base64.b64encode(b"bks_tampered").decode()}})
        eventually(lambda: token_of(api, INGEST) == ingest)


def test_the_connector_sample_applied_with_kubectl_yields_a_working_token(api, operator, indexed, db_url, kubectl,
                                                                         tmp_path):
    """The walk-through in docs/operator.md, as a platform team runs it: `kubectl apply -f` of the
    sample as it is in the repository, `kubectl wait`, the token read from its Secret, a request."""
    sample = ROOT / "k8s/samples/searchworkspace-connector.yaml"
    with operator():
        hold = indexed("search-lexical")  # the index the sample names
        print(f"$ kubectl apply -f {sample.relative_to(ROOT)}\n{kubectl('apply', '-f', str(sample))}")
        output = play(api, pending_job(api, ws_.REGISTER), db_url, tmp_path)
        assert "created workspace acme" in output and "registered ingest token" in output
        complete(hold, api, pending_job(api, ws_.REGISTER))
        print(kubectl("wait", "--for=condition=Ready", "searchworkspace/acme", "--timeout=120s"))
        print(f"$ kubectl get searchworkspaces\n{kubectl('get', 'searchworkspaces')}")
        token = token_of(api, INGEST)
        assert works(db_url, ingest=token) == {"ingest": 201}
        assert works(db_url, ingest="bks_" + "x" * 43) == {"ingest": 401}, "a token the API does not know"


def test_a_declaration_no_retry_can_apply_fails_at_once_with_its_reason(api, operator, indexed, db_url, kubectl,
                                                                         tmp_path):
    """A retired workspace's slug takes no new token: the Job's command says why and exits
    DeclarationRefused's status, its podFailurePolicy fails the Job on the first pod, and the
    SearchWorkspace says RegistrationFailed with that line."""
    env = {**os.environ, "BACKSCROLL_DATABASE_URL": db_url}
    for command in (["workspaces", "create", "acme"], ["workspaces", "retire", "acme"]):
        done = subprocess.run([sys.executable, "-m", "backscroll.cli", *command], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    with operator():
        hold = indexed()
        api.create("searchworkspaces", workspace())
        job = pending_job(api, ws_.REGISTER)
        output = play(api, job, db_url, tmp_path, exit_code=workspaces_refused_exit())
        assert "is retired" in output
        fail_pod(api, job["metadata"]["name"], output, exit_code=workspaces_refused_exit())
        cond = eventually(lambda: ready(api).get("reason") == "RegistrationFailed" and ready(api))
        assert cond["status"] == "False" and "is retired" in cond["message"], cond
        status = api.get("jobs", job["metadata"]["name"])["status"]
        assert status.get("failed") == 1 and not status.get("active"), "failed on its first pod, no retry"
        assert api.get("secrets", INGEST) is None, "nothing delivered"
        assert "RegistrationFailed" in [e["reason"] for e in api.events("acme")]


def workspaces_refused_exit() -> int:
    return ws_.REFUSED_EXIT


def test_deleting_a_token_secret_rotates_it(api, operator, indexed, db_url, kubectl, tmp_path):
    with operator():
        hold = indexed()
        to_ready(api, hold, db_url, tmp_path)
        old = token_of(api, INGEST)
        first = pending_job(api, ws_.REGISTER)["metadata"]["name"]
        kubectl("delete", "secret", INGEST)
        job = pending_job(api, ws_.REGISTER, exclude={first})
        output = play(api, job, db_url, tmp_path)
        assert "revoked the previous" in output
        complete(hold, api, job)
        new = eventually(lambda: token_of(api, INGEST))
        assert new != old
        assert works(db_url, ingest=old)["ingest"] == 401
        assert works(db_url, ingest=new)["ingest"] == 201
        assert works(db_url, runtime=token_of(api, RUNTIME))["search_history"] == 200  # the other one untouched
        eventually(lambda: api.get("jobs", first) is None)  # the superseded Job is removed
        assert "TokenRotated" in [e["reason"] for e in api.events("acme")]


def test_removing_a_token_from_the_spec_revokes_it(api, operator, indexed, db_url, tmp_path):
    with operator():
        hold = indexed()
        to_ready(api, hold, db_url, tmp_path)
        runtime = token_of(api, RUNTIME)
        first = pending_job(api, ws_.REGISTER)["metadata"]["name"]
        api.patch("searchworkspaces", "acme", {"spec": {"tokens": workspace()["spec"]["tokens"][:1]}})
        job = pending_job(api, ws_.REGISTER, exclude={first})
        assert "(sw:" in play(api, job, db_url, tmp_path) and works(db_url, runtime=runtime)["turn"] == 401
        complete(hold, api, job)
        eventually(lambda: api.get("secrets", RUNTIME) is None)
        eventually(lambda: api.get("searchworkspaces", "acme")["status"]["tokens"] == "1/1")
        assert works(db_url, ingest=token_of(api, INGEST))["ingest"] == 201


def test_deleting_the_searchworkspace_revokes_every_token(api, operator, indexed, db_url, proxy, install, helm,
                                                          tmp_path):
    with operator():
        hold = indexed()
        to_ready(api, hold, db_url, tmp_path)
        ingest, runtime = token_of(api, INGEST), token_of(api, RUNTIME)
        assert ws_.FINALIZER in api.get("searchworkspaces", "acme")["metadata"]["finalizers"]
        api.delete("searchworkspaces", "acme")
        job = pending_job(api, ws_.REVOKE)
        assert api.get("searchworkspaces", "acme") is not None, "held by the finalizer until revoked"
        assert "2 token(s) under 'sw:" in play(api, job, db_url, tmp_path)
        complete(hold, api, job)
        eventually(lambda: api.get("searchworkspaces", "acme") is None)
        assert api.get("secrets", INGEST) is None and api.get("secrets", RUNTIME) is None
        assert works(db_url, ingest, runtime) == {"ingest": 401, "turn": 401, "search_history": 401}
    # The chart's rules for SearchWorkspaces are what this lifecycle used: each verb, none missing.
    from .test_rbac_real import WORKSPACE_ONLY, granted, used
    calls = used(c for c in proxy.seen() if f"/namespaces/{install.namespace}/" in c.path)
    (role,) = [d for d in render_chart(helm, install.release, install.namespace)
               if d["kind"] == "Role" and not d["metadata"]["name"].endswith(("-leader", "-jobs"))]
    rules = granted([role], "Role")
    for key, verbs in WORKSPACE_ONLY.items():
        assert (verbs or rules[key]) <= calls.get(key, set()), key


def test_deleting_a_searchworkspace_with_delete_policy_erases_its_data(api, operator, indexed, db_url, tmp_path):
    with operator():
        hold = indexed()
        to_ready(api, hold, db_url, tmp_path, workspace(deletionPolicy="delete"))
        ingest, runtime = token_of(api, INGEST), token_of(api, RUNTIME)
        # Data in it: a conversation (ingest), a turn and a search (runtime).
        assert works(db_url, ingest, runtime) == {"ingest": 201, "turn": 201, "search_history": 200}
        with open_world(db_url).conn as conn:
            acme = conn.execute("select id from workspaces where slug = 'acme'").fetchone()["id"]
            assert conn.execute("select count(*) as n from conversations where workspace_id = %s",
                                (acme,)).fetchone()["n"] == 2
        api.delete("searchworkspaces", "acme")
        job = pending_job(api, ws_.REVOKE)
        assert api.get("searchworkspaces", "acme") is not None, "held by the finalizer until erased"
        assert eventually(lambda: ready(api).get("reason") == "Erasing")
        (container,) = job["spec"]["template"]["spec"]["containers"]
        assert container["args"][:4] == ["workspaces", "erase", "acme", "--yes-erase-workspace-data"]
        output = play(api, job, db_url, tmp_path)
        assert "2 token(s) under 'sw:" in output and "workspace acme (id" in output and "erased" in output
        complete(hold, api, job)
        eventually(lambda: api.get("searchworkspaces", "acme") is None)
        assert "WorkspaceErased" in [e["reason"] for e in api.events("acme")]
        assert api.get("secrets", INGEST) is None and api.get("secrets", RUNTIME) is None
    with open_world(db_url).conn as conn:
        assert conn.execute("select count(*) as n from workspaces where slug = 'acme'").fetchone()["n"] == 0
        for table in ("conversations", "memories", "actors", "api_tokens", "agents"):
            assert conn.execute(f"select count(*) as n from {table} where workspace_id = %s",
                                (acme,)).fetchone()["n"] == 0, table
        assert conn.execute("select count(*) as n from messages m where not exists"
                            " (select 1 from conversations c where c.id = m.conversation_id)").fetchone()["n"] == 0
    with client(db_url) as http:
        assert http.post("/v1/conversations", headers=bearer(ingest), json=conversation_body(
            "t-after", "Rose Room", agent="concierge", audience={"kind": "public"})).status_code == 401
        assert http.post("/v1/turns", headers=bearer(runtime),
                         json={"agent": "concierge", "conversation_id": 1}).status_code == 401


def test_a_target_namespace_is_written_only_where_the_chart_grants_it(
        api, operator, indexed, db_url, control_plane, install, helm, proxy, tmp_path):
    other = f"{api.ns}-agents"[:63]
    control_plane.kubectl("create", "namespace", other)
    try:
        body = workspace(tokens=[{"name": "concierge", "kind": "runtime", "agents": ["concierge"],
                                  "secret": {"name": RUNTIME, "namespace": other}}])
        with operator() as replica:
            hold = indexed()
            api.create("searchworkspaces", body)
            job = pending_job(api, ws_.REGISTER)
            play(api, job, db_url, tmp_path)
            complete(hold, api, job)
            refused = eventually(lambda: ready(api).get("reason") == "SecretWriteForbidden" and ready(api))
            assert refused["status"] == "False" and other in refused["message"]
            assert "operator.tokenNamespaces" in refused["message"]
            # The chart's grant for that namespace (operator.tokenNamespaces), applied as it renders.
            docs = render_chart(helm, install.release, install.namespace, f"operator.tokenNamespaces={{{other}}}")
            grant = [d for d in docs if d["kind"] in ("Role", "RoleBinding") and d["metadata"]["namespace"] == other]
            assert len(grant) == 2
            control_plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                         "items": grant}))
            eventually(lambda: ready(api).get("status") == "True")
            token = token_of(api, RUNTIME, other)
            assert "ownerReferences" not in api.get("secrets", RUNTIME, other)["metadata"]
            assert works(db_url, runtime=token)["search_history"] == 200
            replica.stop()
        with proxy.lock:  # the refusals this test expected, and only those
            refused_calls = [c for c in proxy.calls if c.status == 403]
            assert refused_calls and all(f"/namespaces/{other}/secrets" in c.path for c in refused_calls)
            proxy.calls[:] = [c for c in proxy.calls if c.status != 403]
    finally:
        control_plane.kubectl("delete", "namespace", other, "--wait=false", check=False)


def test_a_searchworkspace_waits_for_its_index(api, operator, indexed, db_url, tmp_path):
    with operator():
        api.create("searchworkspaces", workspace())
        waiting = eventually(lambda: ready(api).get("reason") == "WaitingForIndex" and ready(api))
        assert waiting["status"] == "False" and "SearchIndex search does not exist" in waiting["message"]
        assert not api.list("jobs", f"app.kubernetes.io/component={ws_.REGISTER}") and api.get("secrets", INGEST) is None
        hold = indexed()  # migrated: the index's events release it at once
        job = pending_job(api, ws_.REGISTER)
        play(api, job, db_url, tmp_path)
        complete(hold, api, job)
        eventually(lambda: ready(api).get("status") == "True")
        assert "WaitingForIndex" in [e["reason"] for e in api.events("acme")]
