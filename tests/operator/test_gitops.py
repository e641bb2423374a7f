"""Issue 21's scenarios as a platform team runs them, on the real control plane: the pinned
`kubectl`, the real operator as the chart's ServiceAccount, the samples from k8s/samples, and
Kubernetes' own controllers with KWOK's pods. Only the Backscroll API's status endpoint is played
(the status server, which accepts the operator's token once its register Job succeeded)."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import yaml

from backscroll_operator.builders import embeddings_name
from backscroll_operator.names import Owner

from .conftest import cnpg_cluster, eventually, registered_token, report

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "k8s/samples"
MODEL = "multilingual-e5-small"
NEW = "arctic-embed-l-v2.0@256"
IMAGE = "ghcr.io/backscroll/backscroll:0.1.0"


def server_of(model: str, name: str = "search") -> str:
    return embeddings_name(Owner(name, "", ""), model)


def jobs(api, prefix: str) -> list[str]:
    return sorted(n for n in api.names("jobs") if n.startswith(prefix))


def one_job(api, prefix: str) -> str:
    return eventually(lambda: (found := jobs(api, prefix)) and found[-1])


def token_in(api, secret: str) -> str:
    return base64.b64decode(api.get("secrets", secret)["data"]["token"]).decode()


def secret(kubectl, name: str, **data: str) -> None:
    """`kubectl create secret generic --dry-run=client -o yaml | kubectl apply -f -`: how a
    pipeline writes a Secret."""
    rendered = kubectl("create", "secret", "generic", name, "--dry-run=client", "-o", "yaml",
                       *[f"--from-literal={k}={v}" for k, v in data.items()])
    kubectl("apply", "-f", "-", input=rendered)


def jsonpath(kubectl, kind_name: str, path: str) -> str:
    return kubectl("get", kind_name, "-o", f"jsonpath={path}")


def registered(api, name: str = "search") -> str:
    """The operator's own token, once its register Job succeeded (what the API then accepts)."""
    return eventually(lambda: registered_token(api, api.ns, name))


def sample_yaml(path: str, name: str | None = None, **spec) -> str:
    body = yaml.safe_load((SAMPLES / path).read_text())
    if name:
        body["metadata"]["name"] = name
    body["spec"].update(spec)
    return yaml.safe_dump(body)


def bring_up_sample(kubectl, api, status_server, sample: str = "searchindex.yaml", name: str = "search",
                    **spec) -> str:
    """`kubectl apply -f` the sample with only the database Secret made beforehand, to Ready.
    Returns the operator's registered status token."""
    secret(kubectl, "backscroll-db", uri="postgresql://u:p@db/backscroll")
    body = yaml.safe_load((SAMPLES / sample).read_text())
    model = (body["spec"].get("embeddings") or {}).get("model")
    status_server.reports[name] = report("hybrid", model, embedded=120, total=120) if model else report("lexical")
    kubectl("apply", "-f", "-", input=sample_yaml(sample, name, **spec))
    out = kubectl("wait", "--for=condition=Ready", f"searchindex/{name}", "--timeout=180s", timeout=200)
    assert out.strip() == f"searchindex.search.backscroll.dev/{name} condition met"
    return registered(api, name)


def get_table(kubectl, *args: str) -> list[dict[str, str]]:
    """`kubectl get` as rows of {column: value}, split at the header's column starts."""
    return table(kubectl("get", *args).rstrip("\n").splitlines())


def table(lines: list[str]) -> list[dict[str, str]]:
    starts = [m.start() for m in re.finditer(r"\S+", lines[0])]
    names = lines[0].split()
    rows = []
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None])]
        rows.append(dict(zip(names, cells)))
    return rows


def test_zero_manual_steps_from_apply_to_ready_with_the_operators_own_status_token(kubectl, api, operator,
                                                                                 status_server):
    with operator():
        token = bring_up_sample(kubectl, api, status_server)
        # The operator read the status with its own status token, never an admin token.
        assert status_server.seen_tokens and set(status_server.seen_tokens) <= {f"Bearer {token}"}
        assert f"Bearer {token}" in status_server.seen_tokens
        register = one_job(api, "search-register-")
        args = api.get("jobs", register)["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[:4] == ["tokens", "register", "--kind", "status"] and token not in json.dumps(args)
        (row,) = get_table(kubectl, "searchindexes")
        assert {k: row[k] for k in ("NAME", "MODE", "MODEL", "COVERAGE", "READY")} == {
            "NAME": "search", "MODE": "hybrid", "MODEL": MODEL, "COVERAGE": "100%", "READY": "True"}
        (short,) = get_table(kubectl, "sidx")
        assert short.pop("AGE") and short == {k: v for k, v in row.items() if k != "AGE"}, \
            "the short name answers the same (AGE may tick between the two calls)"
        describe = kubectl("describe", "sidx", "search")
        assert re.search(r"Type:\s+Ready", describe) and "Events:" in describe
        assert re.search(r"Normal\s+Ready\s+.*backscroll-operator", describe), describe

        # Rotation: delete the Secret; a new token and a new register Job, and Ready again.
        kubectl("delete", "secret", "search-status-token")
        eventually(lambda: api.get("secrets", "search-status-token") and token_in(api, "search-status-token") != token)
        eventually(lambda: len(jobs(api, "search-register-")) == 1 and jobs(api, "search-register-")[0] != register)
        rotated = registered(api)
        assert rotated != token
        eventually(lambda: f"Bearer {rotated}" in status_server.seen_tokens)
        kubectl("wait", "--for=condition=Ready", "searchindex/search", "--timeout=120s", timeout=150)


def test_drift_is_reverted_by_the_watch_not_the_resync(kubectl, api, operator, status_server):
    with operator():
        bring_up_sample(kubectl, api, status_server)
    # A resync every 10 minutes: whatever happens within seconds below comes from the watch.
    with operator(interval_s=600):
        kubectl("scale", "deployment/search-api", "--replicas=5")
        kubectl("set", "image", "deployment/search-api", "api=evil:latest")

        def reverted():
            live = api.get("deployments", "search-api")
            return live["spec"]["replicas"] == 2 and \
                live["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGE
        eventually(reverted, timeout=30)
        kubectl("delete", "service", "search-api", "--wait=false")
        eventually(lambda: api.get("services", "search-api"), timeout=30)
        managers = {m["manager"] for m in api.get("deployments", "search-api")["metadata"].get("managedFields") or []
                    if m.get("operation") == "Apply"}
        assert managers == {"backscroll-operator"}


def test_replicas_left_to_an_autoscaler_are_not_reverted(kubectl, api, operator, status_server):
    with operator():
        bring_up_sample(kubectl, api, status_server)
        kubectl("patch", "searchindex", "search", "--type=merge", "-p", '{"spec":{"api":{"manageReplicas":false}}}')
        eventually(lambda: jsonpath(kubectl, "sidx/search", "{.status.observedGeneration}") == "2")
        kubectl("scale", "deployment/search-api", "--replicas=7")  # what an HPA does
        kubectl("set", "image", "deployment/search-api", "api=evil:latest")
        eventually(lambda: api.get("deployments", "search-api")["spec"]["template"]["spec"]["containers"][0]["image"]
                   == IMAGE)
        assert api.get("deployments", "search-api")["spec"]["replicas"] == 7


def test_a_model_rolled_out_blue_green_as_kubectl_shows_it(kubectl, api, operator, status_server, gate):
    worker = gate("worker")  # the worker, its backfill and catch-up Jobs (spec.worker.pod)
    worker.open()
    with operator():
        bring_up_sample(kubectl, api, status_server, worker={"replicas": 1, "pod": {"nodeSelector": worker.selector}})
        eventually(lambda: jsonpath(kubectl, "sidx/search", "{.status.rollout.phase}") == "Complete")
        worker.close()  # the new model's backfill waits while kubectl looks
        kubectl("patch", "searchindex", "search", "--type=merge", "-p",
                json.dumps({"spec": {"embeddings": {"model": NEW, "dimensions": 256}}}))
        eventually(lambda: jsonpath(kubectl, "sidx/search", "{.status.rollout.phase} {.status.rollout.targetModel}")
                   == f"Backfilling {NEW}")
        (row,) = get_table(kubectl, "sidx", "-o", "wide")
        assert (row["MODE"], row["MODEL"], row["READY"], row["ROLLOUT"], row["TARGET"]) == \
            ("hybrid", MODEL, "False", "Backfilling", NEW), "search keeps serving the old model"
        describe = kubectl("describe", "sidx", "search")
        assert "ModelRollingOut" in describe and f"rolling out {NEW}" in describe
        # Backfilled: the worker moves, a catch-up runs, then the API switches at full coverage.
        old = report("hybrid", MODEL, embedded=100, total=100)
        new = report("hybrid", NEW, dimensions=256, embedded=100, total=100)["models"][0]
        status_server.reports["search"] = {**old, "models": [*old["models"], {**new, "current": False}]}
        worker.open()
        eventually(lambda: "arctic" in jsonpath(kubectl, "deploy/search-worker",
                                                '{.spec.template.spec.containers[0].env[?(@.name=="BACKSCROLL_EMBEDDINGS_MODEL")].value}'))
        eventually(lambda: "arctic" in jsonpath(kubectl, "deploy/search-api",
                                                '{.spec.template.spec.containers[0].env[?(@.name=="BACKSCROLL_EMBEDDINGS_MODEL")].value}'))
        assert jobs(api, "search-catchup-"), "the catch-up ran before the switch"
        status_server.reports["search"] = {**report("hybrid", NEW, dimensions=256, embedded=100, total=100)}
        kubectl("wait", "--for=condition=Ready", "sidx/search", "--timeout=180s", timeout=200)
        (row,) = get_table(kubectl, "sidx", "-o", "wide")
        assert (row["MODE"], row["MODEL"], row["READY"], row["ROLLOUT"]) == ("hybrid", NEW, "True", "Complete")
        eventually(lambda: server_of(MODEL) not in api.names("deployments"))


def test_no_deployment_rolls_an_image_before_its_migration(kubectl, api, operator, status_server, gate):
    image = '{.spec.template.spec.containers[0].image}'
    held = gate("everything")
    held.open()
    with operator():
        bring_up_sample(kubectl, api, status_server, sample="searchindex-lexical.yaml", name="search-lexical",
                        pod={"nodeSelector": held.selector})
        held.close()  # the next migration's pod waits
        kubectl("patch", "sidx", "search-lexical", "--type=merge", "-p",
                '{"spec":{"image":"ghcr.io/backscroll/backscroll:0.2.0"}}')
        eventually(lambda: next(n for n in jobs(api, "search-lexical-migrate-")
                                if "0.2.0" in json.dumps(api.get("jobs", n)["spec"])))
        eventually(lambda: jsonpath(kubectl, "sidx/search-lexical", "{.status.observedGeneration}") == "2")
        assert jsonpath(kubectl, "deploy/search-lexical-api", image) == IMAGE
        eventually(lambda: jsonpath(kubectl, "sidx/search-lexical", '{.status.conditions[?(@.type=="Ready")].reason}')
                   == "WaitingForMigrations")
        held.open()
        eventually(lambda: jsonpath(kubectl, "deploy/search-lexical-api", image) == "ghcr.io/backscroll/backscroll:0.2.0")


def test_deleting_never_hangs_on_an_absent_operator(kubectl, api, operator, status_server):
    with operator():
        bring_up_sample(kubectl, api, status_server, sample="searchindex-lexical.yaml", name="search-lexical")
        assert not api.get("searchindexes", "search-lexical")["metadata"].get("finalizers")
    # The operator is gone; deleting returns at once, and the children go with their owner.
    kubectl("delete", "sidx", "search-lexical", "--timeout=20s", timeout=40)
    assert api.get("searchindexes", "search-lexical") is None
    eventually(lambda: not {"search-lexical-api"} & (api.names("deployments") | api.names("services")))


def test_deletion_policy_delete_purges_first(kubectl, api, operator, status_server, gate):
    held = gate("purge")
    held.open()
    with operator():
        bring_up_sample(kubectl, api, status_server, sample="searchindex-lexical.yaml", name="search-lexical",
                        pod={"nodeSelector": held.selector})
        kubectl("patch", "sidx", "search-lexical", "--type=merge", "-p", '{"spec":{"deletionPolicy":"delete"}}')
        eventually(lambda: api.get("searchindexes", "search-lexical")["metadata"].get("finalizers")
                   == ["search.backscroll.dev/purge-database"])
        held.close()  # the purge's pod waits while the test looks
        kubectl("delete", "sidx", "search-lexical", "--wait=false")
        purge = one_job(api, "search-lexical-purge")
        args = api.get("jobs", purge)["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args == ["purge", "--yes-delete-all-data"]
        eventually(lambda: "search-lexical-api" not in api.names("deployments")), "nothing writes while rows go"
        assert api.get("searchindexes", "search-lexical") is not None, "held until the purge succeeded"
        held.open()
        eventually(lambda: api.get("searchindexes", "search-lexical") is None)


def test_the_documented_way_out_of_a_purge_finalizer(kubectl, api, operator, status_server):
    with operator():
        bring_up_sample(kubectl, api, status_server, sample="searchindex-lexical.yaml", name="search-lexical")
        kubectl("patch", "sidx", "search-lexical", "--type=merge", "-p", '{"spec":{"deletionPolicy":"delete"}}')
        eventually(lambda: api.get("searchindexes", "search-lexical")["metadata"].get("finalizers"))
    kubectl("delete", "sidx", "search-lexical", "--wait=false")
    assert api.get("searchindexes", "search-lexical")["metadata"].get("deletionTimestamp")
    docs = (ROOT / "docs/operator.md").read_text()
    patch = re.search(r"kubectl patch searchindex search --type=json \\\n\s+-p '(.+)'", docs).group(1)
    kubectl("patch", "searchindex", "search-lexical", "--type=json", "-p", patch)
    assert api.get("searchindexes", "search-lexical") is None


def test_cnpg_cluster_wired_without_a_hand_made_secret_and_rotation_rolls_the_pods(kubectl, api, operator,
                                                                                 status_server, cnpg_crd):
    versions = '{.spec.template.metadata.annotations.search\\.backscroll\\.dev/secrets-version}'
    with operator():
        kubectl("apply", "-f", str(SAMPLES / "searchindex-cnpg.yaml"))
        eventually(lambda: jsonpath(kubectl, "sidx/search", '{.status.conditions[?(@.type=="Ready")].reason}')
                   == "SecretMissing")
        assert "backscroll-pg-app" in kubectl("describe", "sidx", "search")
        # What CloudNativePG writes once the cluster bootstrapped.
        secret(kubectl, "backscroll-pg-app", uri="postgresql://backscroll:pw1@backscroll-pg-rw:5432/backscroll",
               username="backscroll", password="pw1", dbname="backscroll")
        cnpg_cluster(api, "backscroll-pg", ready=True)  # the migration waits for it (test_migrations.py)
        env = eventually(lambda: {e["name"]: e for e in api.get("deployments", "search-api")["spec"]["template"]
                                  ["spec"]["containers"][0]["env"]})
        assert env["BACKSCROLL_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": "backscroll-pg-app", "key": "uri"}
        assert env["BACKSCROLL_DATABASE_READ_URL"]["value"].startswith(
            f"postgresql://$(BACKSCROLL_CNPG_USER)@backscroll-pg-ro.{api.ns}.svc:5432/")
        registered(api)
        before = jsonpath(kubectl, "deploy/search-api", versions)
        assert before
        secret(kubectl, "backscroll-pg-app", uri="postgresql://backscroll:pw2@backscroll-pg-rw:5432/backscroll",
               username="backscroll", password="pw2", dbname="backscroll")
        eventually(lambda: jsonpath(kubectl, "deploy/search-api", versions) not in ("", before))
        eventually(lambda: jsonpath(kubectl, "deploy/search-worker", versions) ==
                   jsonpath(kubectl, "deploy/search-api", versions))
        # The real Deployment controller rolled new pods for it.
        eventually(lambda: all(p["metadata"].get("annotations", {}).get("search.backscroll.dev/secrets-version")
                               == jsonpath(kubectl, "deploy/search-api", versions)
                               for p in api.list("pods", "app.kubernetes.io/instance=search,app.kubernetes.io/component=api")
                               if not p["metadata"].get("deletionTimestamp")))


def console_blocks(path: Path) -> list[tuple[list[str], list[str]]]:
    """(command argv after `kubectl`, expected output lines) for each `$ kubectl ...` line of the
    file's ```console blocks."""
    found = []
    for block in re.findall(r"```console\n(.*?)```", path.read_text(), flags=re.S):
        command, output = None, []
        for line in [*block.splitlines(), "$ "]:
            if line.startswith("$ "):
                if command and command[0] == "kubectl":
                    found.append((command[1:], output))
                command, output = line[2:].split(), []
            else:
                output.append(line)
    return found


def test_the_readmes_kubectl_output_is_what_kubectl_prints(kubectl, api, operator, status_server, gate):
    """README.md's and docs/operator.md's `kubectl get` and `kubectl wait` blocks, run for real:
    a hybrid index, a lexical one, and a new one still backfilling its first model."""
    blocks = [(args, out) for doc in (ROOT / "README.md", ROOT / "docs/operator.md")
              for args, out in console_blocks(doc) if args[0] in ("get", "wait")]
    assert any(a[:2] == ["get", "searchindexes"] for a, _ in blocks), "the README shows `kubectl get searchindexes`"
    backfill = gate("backfill")
    with operator():
        bring_up_sample(kubectl, api, status_server)
        bring_up_sample(kubectl, api, status_server, sample="searchindex-lexical.yaml", name="search-lexical")
        new = yaml.safe_load((SAMPLES / "searchindex.yaml").read_text())
        new["metadata"]["name"] = "search-new"
        new["spec"]["embeddings"] = {"model": NEW, "dimensions": 256, "external": {"url": "https://emb.example/v1"}}
        new["spec"]["worker"] = {"pod": {"nodeSelector": backfill.selector}}
        status_server.reports["search-new"] = report(
            "degraded", NEW, dimensions=256, embedded=425, total=1000,
            degradation={"category": "backfilling", "coverage": 0.425, "detail": "hybrid over embedded messages"})
        kubectl("apply", "-f", "-", input=yaml.safe_dump(new))
        # Its backfill keeps running: held by the gate, then suspended (a Job's one mutable switch),
        # and the gate opens for the worker's pods.
        job = one_job(api, "search-new-backfill-")
        kubectl("patch", "job", job, "--type=merge", "-p", '{"spec":{"suspend":true}}')
        backfill.open()
        registered(api, "search-new")
        eventually(lambda: jsonpath(kubectl, "sidx/search-new", "{.status.coverage}") == "42.5%")
        eventually(lambda: jsonpath(kubectl, "sidx/search-new", '{.status.conditions[?(@.type=="Ready")].reason}')
                   == "Backfilling")
        for args, expected in blocks:
            actual = kubectl(*args, timeout=90).rstrip("\n").splitlines()
            expected = [line for line in expected if line.strip()]
            assert len(actual) == len(expected), (args, actual)
            if args[0] == "wait":
                assert actual == expected
                continue
            assert actual[0].split() == expected[0].split(), "the columns"
            # Every cell but AGE, which is whatever time the test took.
            assert [{k: v for k, v in row.items() if k != "AGE"} for row in table(actual)] == \
                [{k: v for k, v in row.items() if k != "AGE"} for row in table(expected)], args
