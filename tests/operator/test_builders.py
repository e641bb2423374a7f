"""The manifest builders, without a cluster: what each child is, and who gets which setting."""

from __future__ import annotations

import pytest

from backscroll_operator import builders, rollout
from backscroll_operator.names import HASH_ANNOTATION, Owner, child_name, model_slug
from backscroll_operator.spec import parse

OWNER = Owner(name="search", namespace="team", uid="uid-1")
# Which SearchIndex the data Jobs (migrate, purge, prune) work for (tests/operator/test_data_safety.py).
OWNER_ENV = ("BACKSCROLL_OWNER_UID", "BACKSCROLL_OWNER_NAME")
BASE = {"image": "backscroll:1", "database": {"secretRef": {"name": "db"}}}
EXTERNAL = {**BASE, "embeddings": {"model": "m@256", "dimensions": 256,
                                   "external": {"url": "https://emb.example/v1",
                                                "apiKeySecretRef": {"name": "emb", "key": "k"}}}}
IN_CLUSTER = {**BASE, "embeddings": {"model": "multilingual-e5-small", "dimensions": 384}}


def steady(spec) -> rollout.Plan:
    """The plan of an index whose migration ran and whose API serves the spec's model."""
    return rollout.plan(spec, rollout.Observed(migrated=True, backfilled=frozenset(
        [spec.embeddings.model] if spec.embeddings else [])))


def desired(spec):
    return builders.desired(OWNER, spec, steady(spec))


def api_of(spec):
    return builders.api_deployment(OWNER, spec, steady(spec))


def worker(spec):
    return builders.worker_deployment(OWNER, spec, steady(spec))


def server(spec):
    return builders.embeddings_deployment(OWNER, spec, spec.embeddings)


def backfill(spec):
    return builders.backfill_job(OWNER, spec, spec.embeddings)


def env_of(manifest: dict) -> dict[str, dict]:
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e for e in container.get("env", [])}


def test_every_child_is_owned_and_hashed():
    spec = parse(IN_CLUSTER)
    children = [m for _, _, m in desired(spec) if m is not None]
    children += [builders.migration_job(OWNER, spec), backfill(spec)]
    assert sorted(c["kind"] for c in children) == sorted(
        ["Deployment"] * 3 + ["Service"] * 2 + ["Job"] * 2 + ["PodDisruptionBudget"] + ["NetworkPolicy"] * 2)
    for child in children:
        assert child["metadata"]["namespace"] == "team"
        assert child["metadata"]["ownerReferences"] == [OWNER.reference()]
        assert child["metadata"]["ownerReferences"][0]["controller"] is True
        assert len(child["metadata"]["annotations"][HASH_ANNOTATION]) == 16


def test_same_spec_same_manifest_and_a_change_changes_the_hash():
    one = api_of(parse(BASE))
    assert one == api_of(parse(BASE))
    other = api_of(parse({**BASE, "api": {"replicas": 3}}))
    assert one["metadata"]["annotations"][HASH_ANNOTATION] != other["metadata"]["annotations"][HASH_ANNOTATION]


def test_the_embeddings_key_reaches_only_gateway_callers():
    spec = parse(EXTERNAL)
    key = {"name": "BACKSCROLL_EMBEDDINGS_API_KEY", "valueFrom": {"secretKeyRef": {"name": "emb", "key": "k"}}}
    for manifest in (api_of(spec), worker(spec),
                     backfill(spec)):
        assert env_of(manifest)["BACKSCROLL_EMBEDDINGS_API_KEY"] == key
    migration = env_of(builders.migration_job(OWNER, spec))
    assert set(migration) == {"BACKSCROLL_DATABASE_URL", *OWNER_ENV}, \
        "the migration Job gets the database (and whose it is) and nothing else"


def test_embeddings_settings_map_to_backscroll_env():
    spec = parse({**BASE, "embeddings": {"model": "e5", "dimensions": 384, "queryModel": "e5-query",
                                         "documentModel": "e5-passage", "queryPrefix": "query: ",
                                         "sendInputType": True, "batchSize": 16}})
    env = {k: v.get("value") for k, v in env_of(worker(spec)).items()}
    assert env["BACKSCROLL_EMBEDDINGS_MODEL"] == "e5"
    assert env["BACKSCROLL_EMBEDDINGS_DIMENSIONS"] == "384"
    assert env["BACKSCROLL_EMBEDDINGS_QUERY_MODEL"] == "e5-query"
    assert env["BACKSCROLL_EMBEDDINGS_DOCUMENT_MODEL"] == "e5-passage"
    assert env["BACKSCROLL_EMBEDDINGS_QUERY_PREFIX"] == "query: "
    assert env["BACKSCROLL_EMBEDDINGS_SEND_INPUT_TYPE"] == "true"
    assert env["BACKSCROLL_EMBEDDINGS_BATCH_SIZE"] == "16"
    assert env["BACKSCROLL_EMBEDDINGS_URL"] == f"http://search-embeddings-{model_slug('e5')}.team.svc:80/v1"
    assert "BACKSCROLL_EMBEDDINGS_DOCUMENT_PREFIX" not in env  # unset stays unset (the default "")
    assert "BACKSCROLL_EMBEDDINGS_SEND_DIMENSIONS" not in env
    assert env["BACKSCROLL_WORKER_BACKFILL"] == "false", "the backfill Job does the backfill, not the worker"


def test_lexical_spec_has_no_worker_server_or_backfill():
    spec = parse(BASE)
    wanted = {(resource, name): m is not None for resource, name, m in desired(spec)}
    assert wanted == {("deployments", "search-api"): True, ("services", "search-api"): True,
                      ("deployments", "search-worker"): False,
                      ("horizontalpodautoscalers", "search-api"): False,
                      ("poddisruptionbudgets", "search-api"): True,  # 2 replicas by default
                      ("poddisruptionbudgets", "search-worker"): False,
                      ("networkpolicies", "search-api"): True,
                      ("networkpolicies", "search-embeddings"): False}
    assert steady(spec).servers == () and steady(spec).backfills == ()
    assert builders.migration_job(OWNER, spec)["spec"]["template"]["spec"]["containers"][0]["args"] == ["migrate"]
    assert not any(k.startswith("BACKSCROLL_EMBEDDINGS") for k in env_of(api_of(spec)))


def test_external_endpoint_has_no_server():
    spec = parse(EXTERNAL)
    assert server(spec) is None
    assert builders.embeddings_service(OWNER, spec, spec.embeddings) is None
    assert env_of(api_of(spec))["BACKSCROLL_EMBEDDINGS_URL"]["value"] == "https://emb.example/v1"


def test_in_cluster_server_probes_health_with_a_long_startup():
    spec = parse({**IN_CLUSTER, "embeddings": {**IN_CLUSTER["embeddings"], "server": {
        "modelId": "intfloat/multilingual-e5-small", "args": ["--auto-truncate"], "startupTimeoutSeconds": 600,
        "modelCache": {"claimName": "weights"}}}})
    deployment = server(spec)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"].endswith("text-embeddings-inference:cpu-1.8")
    # The Service keeps port 80; the container listens on 8080, so it needs no root.
    assert container["args"] == ["--model-id", "intfloat/multilingual-e5-small", "--port", "8080", "--auto-truncate"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/health"
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600
    assert container["volumeMounts"] == [{"name": "model-cache", "mountPath": "/data"},
                                         {"name": "tmp", "mountPath": "/tmp"}]
    assert deployment["spec"]["template"]["spec"]["volumes"] == [
        {"name": "model-cache", "persistentVolumeClaim": {"claimName": "weights"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}]
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    names = {e["name"] for e in container["env"]}
    assert names == {"HOME", "HF_HOME"}, "the server gets no Backscroll settings, no key, no database"


def test_backfill_job_named_from_the_model_and_waits_for_nothing_itself():
    spec = parse({**IN_CLUSTER, "embeddings": {**IN_CLUSTER["embeddings"], "backfill": {"rate": 25, "batchSize": 8}}})
    job = backfill(spec)
    assert job["metadata"]["name"] == builders.backfill_name(OWNER, "multilingual-e5-small")
    assert job["metadata"]["name"].startswith("search-backfill-multilingual-e5-small-")
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["backfill", "--model", "multilingual-e5-small", "--quiet", "--batch", "8", "--rate", "25"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert "ttlSecondsAfterFinished" not in job["spec"]


def test_migration_name_follows_image_and_model():
    a = builders.migration_name(OWNER, parse(IN_CLUSTER))
    assert a == builders.migration_name(OWNER, parse(IN_CLUSTER))
    assert a != builders.migration_name(OWNER, parse({**IN_CLUSTER, "image": "backscroll:2"}))
    assert a != builders.migration_name(OWNER, parse(BASE))
    args = builders.migration_job(OWNER, parse(IN_CLUSTER))["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["migrate", "--model", "multilingual-e5-small", "--dimensions", "384"]


def test_api_service_and_pods():
    spec = parse({**BASE, "api": {"replicas": 3, "service": {"type": "LoadBalancer", "port": 443},
                                  "resources": {"limits": {"memory": "1Gi"}}}})
    deployment = api_of(spec)
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 3
    assert pod["automountServiceAccountToken"] is False
    assert pod["containers"][0]["resources"] == {"limits": {"memory": "1Gi"}}
    assert pod["containers"][0]["args"] == ["serve"]
    assert env_of(deployment)["BACKSCROLL_HOST"]["value"] == "0.0.0.0"
    service = builders.api_service(OWNER, spec)
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["ports"] == [{"name": "http", "port": 443, "targetPort": "http", "protocol": "TCP"}]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert builders.status_url(OWNER, spec) == "http://search-api.team.svc:443/v1/status"
    assert builders.status_url(OWNER, spec, "http://proxy/{namespace}/{service}:{port}") == "http://proxy/team/search-api:443"


@pytest.mark.parametrize("name", ["x" * 70, "search"])
def test_names_stay_valid(name):
    assert len(child_name(name, "backfill", model_slug("a-very-long-model-name-with-many-parts@1024"))) <= 63
    assert child_name("a" * 60, "worker") != child_name("a" * 60, "workers")


def test_model_slugs_keep_similar_names_apart():
    assert model_slug("a.b") != model_slug("a-b")
    assert model_slug("Arctic-Embed@256").startswith("arctic-embed-256-")


def test_api_probes_use_the_apis_own_probe_routes():
    from backscroll.api.health import router

    container = api_of(parse(BASE))["spec"]["template"]["spec"]["containers"][0]
    served = {route.path for route in router.routes}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert {"/readyz", "/healthz"} <= served


def test_backscroll_pods_run_non_root_on_a_read_only_root():
    """The API, worker, migration and backfill pods run as the image's non-root user with no
    capabilities and a read-only root filesystem (/tmp an emptyDir); the embeddings server runs as
    uid 1000 with a writable /data (tests/operator/test_pod_security.py checks every pod against
    the restricted profile)."""
    spec = parse(IN_CLUSTER)
    pods = {m["metadata"]["labels"]["app.kubernetes.io/component"]: m["spec"]["template"]["spec"]
            for resource, _, m in desired(spec) if m and resource == "deployments"}
    for job in (builders.migration_job(OWNER, spec), backfill(spec)):
        pods[job["metadata"]["labels"]["app.kubernetes.io/component"]] = job["spec"]["template"]["spec"]
    assert {"api", "worker", "migrate", "backfill", "embeddings"} <= set(pods)
    for component, pod in pods.items():
        container = pod["containers"][0]
        if component == "embeddings":
            assert pod["securityContext"]["runAsUser"] == 1000 and pod["securityContext"]["fsGroup"] == 1000
            env = {e["name"]: e["value"] for e in container["env"]}
            assert env["HOME"] == env["HF_HOME"] == "/data"
            continue
        assert pod["securityContext"]["runAsNonRoot"] is True, component
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, component
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}, component
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]], component


def test_ranking_settings_reach_the_api_and_parse_like_the_api_would(monkeypatch):
    from backscroll.config import Settings

    default = {k: v.get("value") for k, v in env_of(api_of(parse(BASE))).items()
               if k in ("BACKSCROLL_SEARCH_RANKING", "BACKSCROLL_BM25_K1", "BACKSCROLL_BM25_B",
                        "BACKSCROLL_SEARCH_SPEAKER_WEIGHT", "BACKSCROLL_SEARCH_CANDIDATE_POOL")}
    assert default == {"BACKSCROLL_SEARCH_RANKING": "bm25", "BACKSCROLL_BM25_K1": "1.2", "BACKSCROLL_BM25_B": "0.3",
                       "BACKSCROLL_SEARCH_SPEAKER_WEIGHT": "1.0", "BACKSCROLL_SEARCH_CANDIDATE_POOL": "500"}
    # The operator's defaults are the API's own.
    api = Settings.declared().search
    assert (api.search_ranking, api.bm25_k1, api.bm25_b, api.search_speaker_weight, api.search_candidate_pool) == \
        ("bm25", 1.2, 0.3, 1.0, 500)
    spec = parse({**BASE, "ranking": {"method": "ts_rank_cd", "k1": 0.9, "speakerWeight": 0.5, "candidatePool": 0}})
    env = {k: v.get("value") for k, v in env_of(api_of(spec)).items()}
    assert env["BACKSCROLL_SEARCH_RANKING"] == "ts_rank_cd" and env["BACKSCROLL_BM25_K1"] == "0.9"
    assert env["BACKSCROLL_SEARCH_SPEAKER_WEIGHT"] == "0.5" and env["BACKSCROLL_SEARCH_CANDIDATE_POOL"] == "0"
    for name, value in env.items():
        if name.startswith(("BACKSCROLL_SEARCH_", "BACKSCROLL_BM25_")):
            monkeypatch.setenv(name, value)
    parsed = Settings(_env_file=None).search  # read from the environment as the API reads it
    assert (parsed.search_ranking, parsed.bm25_k1, parsed.search_candidate_pool) == ("ts_rank_cd", 0.9, 0)


def test_cnpg_cluster_wires_its_app_secret_and_read_service():
    spec = parse({"image": "backscroll:1", "database": {"cnpgClusterRef": {"name": "pg"}}})
    env = env_of(api_of(spec))
    assert env["BACKSCROLL_DATABASE_URL"] == {"name": "BACKSCROLL_DATABASE_URL",
                                              "valueFrom": {"secretKeyRef": {"name": "pg-app", "key": "uri"}}}
    assert env["PGPASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "pg-app", "key": "password"}
    assert env["BACKSCROLL_DATABASE_READ_URL"]["value"] == \
        "postgresql://$(BACKSCROLL_CNPG_USER)@pg-ro.team.svc:5432/$(BACKSCROLL_CNPG_DBNAME)"
    # $(VAR) only expands variables defined before it in the same container.
    names = list(env)
    assert names.index("BACKSCROLL_CNPG_USER") < names.index("BACKSCROLL_DATABASE_READ_URL")
    assert names.index("BACKSCROLL_CNPG_DBNAME") < names.index("BACKSCROLL_DATABASE_READ_URL")
    migration = env_of(builders.migration_job(OWNER, spec))
    assert set(migration) == {"BACKSCROLL_DATABASE_URL", *OWNER_ENV}, "the migration uses the primary only"
    primary_only = parse({"image": "backscroll:1", "database": {"cnpgClusterRef": {"name": "pg", "readService": "rw"}}})
    assert "BACKSCROLL_DATABASE_READ_URL" not in env_of(api_of(primary_only))


@pytest.mark.parametrize("database, message", [
    ({}, "give either secretRef or cnpgClusterRef"),
    ({"secretRef": {"name": "db"}, "cnpgClusterRef": {"name": "pg"}}, "give either secretRef or cnpgClusterRef"),
    ({"cnpgClusterRef": {"name": "pg"}, "readReplicaSecretRef": {"name": "ro"}}, "drop readReplicaSecretRef"),
])
def test_one_database_source(database, message):
    from backscroll_operator.spec import SpecError

    with pytest.raises(SpecError, match=message):
        parse({"image": "backscroll:1", "database": database})


def test_replicas_left_to_an_autoscaler_are_not_in_the_manifest():
    managed = api_of(parse(BASE))
    assert managed["spec"]["replicas"] == 2
    left = api_of(parse({**BASE, "api": {"manageReplicas": False}}))
    assert "replicas" not in left["spec"]
    spec = parse({**IN_CLUSTER, "worker": {"manageReplicas": False}})
    assert "replicas" not in worker(spec)["spec"]


def test_a_secret_version_rolls_the_pods_and_nothing_else():
    spec = parse(IN_CLUSTER)
    one = builders.api_deployment(OWNER, spec, steady(spec), "db:uid-1:7")
    two = builders.api_deployment(OWNER, spec, steady(spec), "db:uid-1:8")
    annotations = two["spec"]["template"]["metadata"]["annotations"]
    assert annotations["search.backscroll.dev/secrets-version"] == "db:uid-1:8"
    strip = [dict(m, metadata={}, spec={**m["spec"], "template": {**m["spec"]["template"], "metadata": {}}})
             for m in (one, two)]
    assert strip[0] == strip[1], "only the pod template's annotation differs"


def test_one_embeddings_server_per_model_and_the_api_reads_what_it_serves():
    spec = parse(IN_CLUSTER)
    name = builders.embeddings_name(OWNER, "multilingual-e5-small")
    assert name.startswith("search-embeddings-multilingual-e5-small-")
    assert builders.embeddings_name(OWNER, "other") != name
    api = api_of(spec)
    assert builders.read_embeddings(api) == spec.embeddings, "the annotation reads back as the spec's model"
    assert api["metadata"]["annotations"]["search.backscroll.dev/image"] == "backscroll:1"
    assert builders.read_embeddings({"metadata": {"annotations": {"search.backscroll.dev/embeddings": "{"}}}) is None


def test_status_token_secret_and_its_registration_job():
    secret = builders.status_token_secret(OWNER, "bks_status_x")
    assert secret["metadata"]["name"] == "search-status-token" and secret["stringData"] == {"token": "bks_status_x"}
    spec = parse(BASE)
    job = builders.register_job(OWNER, spec, "uid-a")
    assert job["metadata"]["name"] != builders.register_job(OWNER, spec, "uid-b")["metadata"]["name"], \
        "a regenerated Secret is registered by a new Job"
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][:4] == ["tokens", "register", "--kind", "status"]
    assert "bks_status_x" not in str(job), "the secret never appears in a Job"
    env = env_of(job)
    assert env["BACKSCROLL_STATUS_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "search-status-token", "key": "token"}


def test_rollout_and_deletion_jobs():
    spec = parse(IN_CLUSTER)
    catchup = builders.catchup_job(OWNER, spec, spec.embeddings)
    assert catchup["spec"]["template"]["spec"]["containers"][0]["args"][:3] == ["backfill", "--model",
                                                                                 "multilingual-e5-small"]
    assert catchup["metadata"]["name"] != backfill(spec)["metadata"]["name"]
    prune = builders.prune_job(OWNER, spec, "old-model")
    assert prune["spec"]["template"]["spec"]["containers"][0]["args"] == ["models", "drop", "old-model", "--yes",
                                                                           "--quiet"]
    purge = builders.purge_job(OWNER, spec)
    assert purge["spec"]["template"]["spec"]["containers"][0]["args"] == ["purge", "--yes-delete-all-data"]
    for job in (prune, purge):
        assert set(env_of(job)) == {"BACKSCROLL_DATABASE_URL", *OWNER_ENV}


def test_worker_has_probes_on_its_health_port(monkeypatch):
    container = worker(parse(IN_CLUSTER))["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert {"name": "BACKSCROLL_WORKER_HEALTH_PORT", "value": "8081"} in container["env"]
    assert {"name": "BACKSCROLL_WORKER_HEALTH_HOST", "value": "0.0.0.0"} in container["env"]
    from backscroll.config import Settings

    for variable in container["env"]:
        if variable["name"].startswith("BACKSCROLL_WORKER_HEALTH_"):
            monkeypatch.setenv(variable["name"], variable["value"])
    worker_settings = Settings(_env_file=None).worker
    assert (worker_settings.worker_health_port, worker_settings.worker_health_host) == (8081, "0.0.0.0"), \
        "the names the operator sets are the worker's settings"


def test_a_missing_hub_token_secret_blocks_with_its_field_and_does_not_roll_the_backscroll_pods():
    from backscroll_operator.reconcile import Blocked, check_secrets

    class Secrets:
        def __init__(self, **secrets):
            self.secrets = secrets

        def get(self, resource, namespace, name):
            return self.secrets.get(name)

    spec = parse({**IN_CLUSTER, "embeddings": {**IN_CLUSTER["embeddings"], "server": {
        "modelSource": {"tokenSecretRef": {"name": "hf", "key": "token"}}}}})
    db = {"metadata": {"name": "db", "uid": "u-db", "resourceVersion": "5"}, "data": {"uri": "eA=="}}
    with pytest.raises(Blocked, match="spec.embeddings.server.modelSource.tokenSecretRef"):
        check_secrets(Secrets(db=db), OWNER, spec)
    hf = {"metadata": {"name": "hf", "uid": "u-hf", "resourceVersion": "6"}, "data": {"token": "YQ=="}}
    one = check_secrets(Secrets(db=db, hf=hf), OWNER, spec)
    rotated = {"metadata": {**hf["metadata"], "resourceVersion": "9"}, "data": {"token": "Yg=="}}
    assert one == check_secrets(Secrets(db=db, hf=rotated), OWNER, spec) == "db:u-db:5"
