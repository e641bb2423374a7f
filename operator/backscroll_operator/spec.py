"""The SearchIndex spec as the operator reads it: parsed, defaulted and checked.

This model is the SearchIndex spec's one home: the CRD's spec schema (types, defaults, bounds,
descriptions, CEL rules) is generated from it (crdgen.py, index_crd.py; `make chart-sync` writes
the files and the chart's values.schema.json), and the operator parses every object through it.
The CRD's CEL rules refuse most mistakes at `kubectl apply` time, but an API server without them
(an old cluster, a CRD applied by hand without its rules) would let them through, so each model
validator checks its rule too and refuses with the rule's own message (a `crdgen.Rule`).
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema, model_validator
from pydantic.alias_generators import to_camel

from .crdgen import Rule, filled_in, validations
from .names import PURGE_FINALIZER

# pgvector stores up to 16,000 dimensions but indexes (HNSW) at most 2,000; Backscroll indexes
# every model, so 2,000 is the real limit (BACKSCROLL_EMBEDDINGS_DIMENSIONS has the same bound).
MAX_DIMENSIONS = 2000
DEFAULT_SERVER_IMAGE = "ghcr.io/huggingface/text-embeddings-inference:cpu-1.8"


class SpecError(ValueError):
    """A spec the operator cannot act on; `field` is its path, e.g. `spec.embeddings.dimensions`."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class _Model(BaseModel):
    # camelCase as in the manifest. Fields this operator does not know are ignored, not refused: a
    # newer CRD's defaulted field reaches an older operator in every object (the API server fills
    # defaults in as it reads), and refusing it made every index InvalidSpec during an upgrade.
    # `unknown_fields` names them for the log. A misspelt field does not get this far: the CRD's
    # schema refuses it (a strict client) or prunes it.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)


SECRET_NAME = "Name of a Secret in the SearchIndex's namespace."
SECRET_KEY = "Key within the Secret."


class SecretKeyRef(_Model):
    name: str = Field(min_length=1, description=SECRET_NAME)
    key: str = Field(min_length=1, description=SECRET_KEY)


class DatabaseRef(_Model):
    name: str = Field(min_length=1, description=SECRET_NAME)
    key: str = Field(default="uri", description=SECRET_KEY)


class TokenRef(_Model):
    name: str = Field(min_length=1, description=SECRET_NAME)
    key: str = Field(default="token", description=SECRET_KEY)


class CnpgClusterRef(_Model):
    """A CloudNativePG Cluster in the same namespace: its `<name>-app` Secret (key `uri`) is the
    database URL, and reads go to the Service `readService` names (`<name>-ro` by default)."""

    name: str = Field(min_length=1, max_length=50, description="Name of the postgresql.cnpg.io Cluster.")
    read_service: Literal["ro", "r", "rw"] = Field(
        default="ro", description="NAME-ro (replicas only: needs instances >= 2), NAME-r (any instance) or "
                                  "NAME-rw (the primary: no replica reads).")
    port: int = Field(default=5432, ge=1, le=65535, description="The read Service's port.")

    @property
    def app_secret(self) -> DatabaseRef:
        return DatabaseRef(name=f"{self.name}-app", key="uri")


ONE_SOURCE = Rule("has(self.secretRef) != has(self.cnpgClusterRef)", "give either secretRef or cnpgClusterRef")
CNPG_READS = Rule("!(has(self.cnpgClusterRef) && has(self.readReplicaSecretRef))",
                  "cnpgClusterRef chooses the read service itself (readService): drop readReplicaSecretRef")
BACKUP_NEEDS_CNPG = Rule("!(has(self.backupBeforeMigration) && self.backupBeforeMigration) || has(self.cnpgClusterRef)",
                         "backupBeforeMigration backs up a CloudNativePG cluster: it needs cnpgClusterRef")


class Database(_Model):
    model_config = ConfigDict(json_schema_extra=validations(ONE_SOURCE, CNPG_READS, BACKUP_NEEDS_CNPG))

    secret_ref: DatabaseRef | None = Field(
        default=None, description="Secret key holding the PostgreSQL URI (PostgreSQL >= 15 with pgvector >= 0.8 and "
                                  "pg_trgm); becomes BACKSCROLL_DATABASE_URL in every Backscroll pod.")
    read_replica_secret_ref: DatabaseRef | None = Field(
        default=None, description="Optional Secret key holding a read-only replica's URI; becomes "
                                  "BACKSCROLL_DATABASE_READ_URL in the API pods, which then serve people's reads "
                                  "(session list and search, one session, its transcript) from the replica. Tokens, "
                                  "writes, search_history and usage-ledger rows stay on the primary.")
    cnpg_cluster_ref: CnpgClusterRef | None = Field(
        default=None, description="A CloudNativePG Cluster in this namespace: BACKSCROLL_DATABASE_URL comes from its "
                                  "NAME-app Secret (key uri); people's reads go to the Service readService names, "
                                  "with the app user's credentials from the same Secret. Its database needs the "
                                  "extensions vector, pg_trgm and btree_gin created by a superuser (a CNPG Database "
                                  "resource with spec.extensions; docs/cnpg.md).")
    backup_before_migration: bool = Field(
        default=False, description="With cnpgClusterRef: before each new migration Job (a new image, model or "
                                   "database) the operator creates a CloudNativePG Backup of the cluster "
                                   "(NAME-premigrate-HASH) and starts the migration only once its phase is "
                                   "completed. The cluster must have backups configured (docs/upgrades.md).")
    backup_method: Literal["barmanObjectStore", "volumeSnapshot"] = Field(
        default="barmanObjectStore",
        description="The Backup's spec.method (how the cluster is configured to back up).")

    @model_validator(mode="after")
    def _one_source(self) -> Database:
        if (self.secret_ref is None) == (self.cnpg_cluster_ref is None):
            raise ValueError(ONE_SOURCE.message)
        if self.cnpg_cluster_ref is not None and self.read_replica_secret_ref is not None:
            raise ValueError(CNPG_READS.message)
        if self.backup_before_migration and self.cnpg_cluster_ref is None:
            raise ValueError(BACKUP_NEEDS_CNPG.message)
        return self

    @property
    def primary(self) -> DatabaseRef:
        """The Secret key holding the primary's URL, wherever it comes from."""
        return self.secret_ref or self.cnpg_cluster_ref.app_secret


# A Kubernetes resource quantity (apimachinery's resource.Quantity): `500m`, `1.5`, `512Mi`, `1e3`.
QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
                    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
# YAML's `cpu: 2` is a number: read as the string "2", then checked as any other quantity; the
# CRD says the same as Kubernetes' own quantities do (int-or-string).
Quantity = Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, int | float) and not isinstance(v, bool)
                                          else v), Field(pattern=QUANTITY_PATTERN),
                     WithJsonSchema({"x-kubernetes-int-or-string": True,
                                     "anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY_PATTERN})]


class ResourceRequirements(_Model):
    """A container's resources; absent, the component's defaults (builders.DEFAULT_RESOURCES)."""

    requests: dict[str, Quantity] | None = Field(
        default=None,
        description="What the scheduler reserves per resource name (cpu, memory, ephemeral-storage, ...).")
    limits: dict[str, Quantity] | None = Field(
        default=None, description="The most the container may use per resource name.")


def _resources(component: str, defaults: str) -> dict:
    return {"default": None, "description": f"Container resources of {component}, as in a pod (quantities such as "
                                            f"500m, 1.5, 512Mi). Absent: {defaults}. Given: exactly these (no "
                                            f"defaults merged in)."}


def _pod(whose: str) -> dict:
    return {"default_factory": PodSettings,
            "description": f"Scheduling and metadata of {whose}, added to spec.pod's (maps key by key, lists "
                           f"appended)."}


class PodSettings(_Model):
    """Scheduling and metadata of a component's pods. `spec.pod` applies to every pod the operator
    creates (Jobs included); `spec.api.pod`, `spec.worker.pod` and `spec.embeddings.server.pod`
    add to it for their own pods (their maps win key by key, lists are appended)."""

    node_selector: dict[str, str] = Field(default_factory=dict, description="The pods' nodeSelector.")
    tolerations: list[dict[str, Any]] = Field(default_factory=list,
                                              description="The pods' tolerations, as in a pod spec.")
    affinity: dict[str, Any] | None = Field(
        default=None, description="The pods' affinity (nodeAffinity, podAffinity, podAntiAffinity), as in a pod spec.")
    topology_spread_constraints: list[dict[str, Any]] | None = Field(
        default=None, description="Deployments' pods only. Absent: spread across nodes (kubernetes.io/hostname) and "
                                  "zones (topology.kubernetes.io/zone), maxSkew 1, whenUnsatisfiable ScheduleAnyway; "
                                  "[] spreads nothing; given: these constraints instead.")
    image_pull_secrets: list[str] = Field(
        default_factory=list, description="Names of Secrets (kubernetes.io/dockerconfigjson) to pull the images with.")
    annotations: dict[str, str] = Field(default_factory=dict,
                                        description="Annotations on the pods (the operator's own win on a clash).")
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels on the pods (the operator's app.kubernetes.io/* labels win on a clash).")
    priority_class_name: str | None = Field(default=None, description="The pods' priorityClassName.")


class Autoscaling(_Model):
    """A HorizontalPodAutoscaler (autoscaling/v2) on CPU for the API; the Deployment's replicas
    are then the HPA's."""

    min_replicas: int = Field(default=2, ge=1,
                              description="Fewest API pods (2 or more also gets a PodDisruptionBudget).")
    max_replicas: int = Field(default=10, ge=1, description="Most API pods.")
    target_cpu_utilization_percentage: int = Field(
        default=70, ge=1, le=100, alias="targetCPUUtilizationPercentage",
        description="Average CPU use, as a share of the pods' CPU requests, the HPA keeps them at.")

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        if self.max_replicas < self.min_replicas:
            raise ValueError("maxReplicas must be at least minReplicas")
        return self


class Service(_Model):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(default="ClusterIP", description="Service type.")
    port: int = Field(default=8080, ge=1, le=65535, description="Service port (the container listens on 8080).")


class Api(_Model):
    replicas: int = Field(default=2, ge=0, description="Replicas of the API Deployment.")
    # False leaves spec.replicas of the Deployment to whoever else manages it (an HPA, KEDA):
    # the operator's applied configuration then omits the field, so it never reverts their scale.
    manage_replicas: bool = Field(
        default=True, description="false leaves the Deployment's replicas to someone else (an HPA): the operator's "
                                  "server-side apply then omits the field and never reverts it.")
    image: str | None = Field(default=None, description="Image for the API only (default spec.image).")
    resources: ResourceRequirements | None = Field(
        **_resources("the API", "requests cpu 100m, memory 256Mi; limits cpu 1, memory 512Mi"))
    service: Service = filled_in(Service, "The API's Service, named NAME-api.")
    status_token_secret_ref: TokenRef | None = Field(
        default=None, description="Optional Secret key holding a status token (`backscroll tokens create --kind "
                                  "status`: it answers GET /v1/status and nothing else) the operator uses to read "
                                  "GET /v1/status. Default: the operator generates a status token into the Secret "
                                  "NAME-status-token and a Job registers its digest after the migration; deleting "
                                  "that Secret rotates it.")
    autoscaling: Autoscaling | None = Field(
        default=None, description="A HorizontalPodAutoscaler (autoscaling/v2, NAME-api) on the API pods' CPU; the "
                                  "Deployment's replicas are then the HPA's (replicas is ignored). Needs a metrics "
                                  "server. maxReplicas below minReplicas is refused by the operator (InvalidSpec).")
    pod: PodSettings = Field(**_pod("the API pods"))


class Worker(_Model):
    replicas: int = Field(default=1, ge=0, description="Replicas of the worker Deployment.")
    manage_replicas: bool = Field(
        default=True, description="false leaves the worker Deployment's replicas to someone else (an HPA).")
    resources: ResourceRequirements | None = Field(**_resources(
        "the worker, the backfill and catch-up Jobs and the operator's other Jobs",
        "requests cpu 100m, memory 256Mi; limits cpu 1, memory 1Gi"))
    pod: PodSettings = Field(**_pod("the worker pods and the backfill and catch-up Jobs' pods"))


class ModelCache(_Model):
    size_limit: str = Field(default="10Gi",
                            description="Size limit of the emptyDir cache (used when claimName is absent).")
    claim_name: str | None = Field(
        default=None, description="A PersistentVolumeClaim to keep weights across restarts (the Deployment then uses "
                                  "the Recreate strategy).")


class ModelVolume(_Model):
    claim_name: str = Field(min_length=1, description="Name of the PersistentVolumeClaim.")


class ModelSource(_Model):
    """Where the server gets its weights: the Hugging Face Hub by default; a mirror (HF_ENDPOINT),
    a token for gated models (HF_TOKEN), or a pre-populated claim read offline."""

    mirror_url: str | None = Field(
        default=None, pattern=r"^https?://",
        description="A Hub mirror or proxy (HF_ENDPOINT), e.g. https://hf-mirror.example.com.")
    token_secret_ref: SecretKeyRef | None = Field(
        default=None, description="Secret key holding a Hugging Face token (HF_TOKEN).")
    volume: ModelVolume | None = Field(
        default=None, description="A PersistentVolumeClaim already holding the weights (a Hub cache), mounted "
                                  "read-only at /data with HF_HUB_OFFLINE=1: nothing is downloaded. Replaces "
                                  "modelCache.")


# Every replica mounts the cache read-write: a ReadWriteOnce claim attaches to one node only, so a
# second replica elsewhere hangs on Multi-Attach (tests/operator/test_tei_volumes.py).
MULTI_ATTACH = (
    "modelCache.claimName with 2 or more replicas: every replica would mount the claim read-write, and a "
    "ReadWriteOnce claim attaches to one node only (Multi-Attach errors). Run one replica, drop claimName "
    "(each pod then caches in an emptyDir), or put the weights on a ReadOnlyMany or ReadWriteMany claim "
    "given as modelSource.volume.")
ONE_CLAIM_REPLICA = Rule("self.replicas < 2 || !has(self.modelCache.claimName)", MULTI_ATTACH)


class Server(_Model):
    model_config = ConfigDict(json_schema_extra=validations(ONE_CLAIM_REPLICA))

    image: str = Field(default=DEFAULT_SERVER_IMAGE,
                       description="Server image; any server of the OpenAI embeddings protocol with GET /health.")
    model_id: str | None = Field(
        default=None, description="Model the server loads (TEI --model-id), e.g. intfloat/multilingual-e5-small; "
                                  "default spec.embeddings.model.")
    args: list[str] = Field(default_factory=list, description="Extra server arguments, after --model-id and --port.")
    replicas: int = Field(default=1, ge=1, description="Replicas of the server Deployment.")
    resources: ResourceRequirements | None = Field(
        **_resources("the server", "requests cpu 500m, memory 1Gi; limits cpu 2, memory 4Gi"))
    port: int = Field(default=80, ge=1, le=65535,
                      description="The server Service's port (BACKSCROLL_EMBEDDINGS_URL); the container itself listens "
                                  "on 8080 (TEI --port 8080), so it runs without root or NET_BIND_SERVICE.")
    model_cache: ModelCache = filled_in(ModelCache, "The volume mounted at /data, where TEI keeps downloaded weights.")
    model_source: ModelSource = filled_in(
        ModelSource, "Where the server gets its weights: the Hugging Face Hub by default; a mirror, a token for gated "
                     "or private models, or a pre-populated volume read offline.")
    startup_timeout_seconds: int = Field(
        default=900, ge=30,
        description="How long the startup probe on /health allows for downloading and loading the weights.")
    pod: PodSettings = Field(**_pod("the server pods"))

    @model_validator(mode="after")
    def _one_volume(self) -> Server:
        # No CEL rule says this one (the API server accepts both; the operator refuses them).
        if self.model_source.volume is not None and self.model_cache.claim_name is not None:
            raise ValueError("modelSource.volume replaces modelCache: drop modelCache.claimName")
        if self.replicas >= 2 and self.model_cache.claim_name is not None:
            raise ValueError(ONE_CLAIM_REPLICA.message)
        return self


class External(_Model):
    url: str = Field(pattern=r"^https?://", description="Base URL up to and including /v1 (BACKSCROLL_EMBEDDINGS_URL), "
                                                        "e.g. https://api.openai.com/v1.")
    api_key_secret_ref: SecretKeyRef | None = Field(
        default=None, description="Secret key holding the endpoint's key; becomes BACKSCROLL_EMBEDDINGS_API_KEY in the "
                                  "API, the worker and the backfill Jobs only.")


class Backfill(_Model):
    rate: float = Field(default=0.0, ge=0,
                        description="Messages per second at most (--rate; 0 is as fast as the server answers).")
    batch_size: int = Field(default=32, ge=1, le=2048, description="Messages per request and transaction (--batch).")
    backoff_limit: int = Field(default=6, ge=0, description="Job backoffLimit; the backfill resumes where it stopped.")


class Rollout(_Model):
    min_coverage: float = Field(
        default=1.0, ge=0, le=1,
        description="Share of indexable messages the new model must cover before search uses it.")
    # Keeping them makes a rollback a catch-up, not a re-embedding.
    retain_previous: bool = Field(
        default=True, description="Keep the superseded model's vectors (a rollback then only embeds what arrived "
                                  "since); false deletes them (`backscroll models drop`) once the new model serves.")


ONE_ENDPOINT = Rule("!(has(self.server) && has(self.external))", "give either server or external, not both")


class Embeddings(_Model):
    model_config = ConfigDict(json_schema_extra=validations(ONE_ENDPOINT))

    model: str = Field(min_length=1, max_length=200,
                       description="The name vectors are stored under (BACKSCROLL_EMBEDDINGS_MODEL), e.g. "
                                   "multilingual-e5-small or arctic-embed-l-v2.0@256. A new name starts a new "
                                   "migration (its vector index) and a new backfill Job.")
    dimensions: int = Field(ge=1, le=MAX_DIMENSIONS,
                            description="Size of the stored vectors (BACKSCROLL_EMBEDDINGS_DIMENSIONS, `migrate "
                                        f"--dimensions`); at most {MAX_DIMENSIONS}, pgvector's limit for an HNSW "
                                        "index.")
    query_model: str | None = Field(
        default=None,
        description="Model name sent when embedding a query (BACKSCROLL_EMBEDDINGS_QUERY_MODEL; default model).")
    document_model: str | None = Field(
        default=None,
        description="Model name sent when embedding messages (BACKSCROLL_EMBEDDINGS_DOCUMENT_MODEL; default model).")
    query_prefix: str = Field(
        default="", description="Text put before every query (BACKSCROLL_EMBEDDINGS_QUERY_PREFIX), e.g. 'query: ' for "
                                "e5 on TEI.")
    document_prefix: str = Field(
        default="",
        description="Text put before every message (BACKSCROLL_EMBEDDINGS_DOCUMENT_PREFIX), e.g. 'passage: '.")
    send_input_type: bool = Field(
        default=False, description="Send the non-standard input_type field (BACKSCROLL_EMBEDDINGS_SEND_INPUT_TYPE).")
    send_dimensions: bool = Field(
        default=False, description="Send dimensions for Matryoshka truncation (BACKSCROLL_EMBEDDINGS_SEND_DIMENSIONS).")
    batch_size: int = Field(
        default=32, ge=1, le=2048,
        description="Texts per embeddings request (BACKSCROLL_EMBEDDINGS_BATCH_SIZE); TEI's default limit is 32.")
    server: Server | None = Field(
        default=None, description="The in-cluster embeddings server, a Deployment and Service named "
                                  "NAME-embeddings-MODEL (the default when external is absent). Its URL becomes "
                                  "BACKSCROLL_EMBEDDINGS_URL. It runs under the restricted Pod Security profile as "
                                  "uid 1000 with HOME and HF_HOME at /data.")
    external: External | None = Field(
        default=None, description="An embeddings endpoint outside the cluster (no server is created).")
    backfill: Backfill = filled_in(
        Backfill, "The backfill Job of the current model (`backscroll backfill --model MODEL`), run once its "
                  "migration succeeded.")
    rollout: Rollout = filled_in(
        Rollout, "How a new model replaces the one search uses (blue/green): it is migrated and backfilled while "
                 "search keeps serving the old model; the worker moves to it and a catch-up Job embeds what arrived "
                 "meanwhile; the API moves once it covers minCoverage.")

    @model_validator(mode="after")
    def _one_endpoint(self) -> Embeddings:
        if self.server is not None and self.external is not None:
            raise ValueError(ONE_ENDPOINT.message)
        return self

    def server_or_default(self) -> Server:
        return self.server or Server()

    @property
    def in_cluster(self) -> bool:
        # No endpoint named means the default in-cluster server: `{model, dimensions}` suffices.
        return self.external is None


class Ranking(_Model):
    # The API's lexical ranking (BACKSCROLL_SEARCH_RANKING, BACKSCROLL_BM25_K1, ...); the bounds
    # are the API's own settings' bounds.
    method: Literal["bm25", "ts_rank_cd"] = Field(
        default="bm25",
        description="BM25 (document frequencies per agent), or PostgreSQL's ts_rank_cd for comparison.")
    k1: float = Field(default=1.2, ge=0, le=10, description="BM25 term-frequency saturation.")
    b: float = Field(default=0.3, ge=0, le=1, description="BM25 document-length normalization.")
    speaker_weight: float = Field(
        default=1.0, ge=0, le=4,
        description="What a query word found in the speaker's name counts for, against 1 per occurrence in the body.")
    candidate_pool: int = Field(
        default=500, ge=0, le=100_000,
        description="Most messages scored per search (rarest terms first, then the most recent); 0 scores every match.")


class NetworkPolicy(_Model):
    enabled: bool = Field(default=True, description="Create the NetworkPolicies.")


# The API server's transition rule (it reads oldSelf); parse's `registered` says the same for a
# server without it.
SAME_DIMENSIONS = Rule(
    "!has(oldSelf.embeddings) || !has(self.embeddings) || self.embeddings.model != oldSelf.embeddings.model || "
    "self.embeddings.dimensions == oldSelf.embeddings.dimensions",
    "a model's dimensions cannot change under the same model name (its stored vectors have the old size): give it "
    "a new name, e.g. MODEL@DIMENSIONS")


class SearchIndexSpec(_Model):
    model_config = ConfigDict(json_schema_extra=validations(SAME_DIMENSIONS))

    image: str = Field(min_length=1, description="The Backscroll image for the migration Job, the API, the worker and "
                                                 "the backfill Jobs (command `backscroll`). A new image runs a new "
                                                 "migration Job.")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="imagePullPolicy of every container the operator creates.")
    database: Database = Field(
        description="Where the data lives: a Secret with the URI (secretRef) or a CloudNativePG Cluster "
                    "(cnpgClusterRef). Only the pods read these Secrets' values; the operator checks they exist and "
                    "rolls the pods when one changes.")
    text_search_config: str = Field(
        default="multilingual", pattern=r"^[a-z_][a-z0-9_.]*$",
        description="PostgreSQL text search configuration for new workspaces: multilingual (each message stemmed in "
                    "its own detected language), simple (no stemming), or one language for every message (english, "
                    "german, ...); becomes BACKSCROLL_TEXT_SEARCH_CONFIG in the API pods, the default of `backscroll "
                    "workspaces create` run there (`--ts-config` overrides it).")
    ranking: Ranking = filled_in(
        Ranking, "Lexical ranking of both searches, as environment of the API pods (bench/RESULTS.md, Ranking, says "
                 "how the defaults were chosen).")
    api: Api = filled_in(Api, "The API Deployment (`backscroll serve`) and its Service.")
    worker: Worker = filled_in(
        Worker, "The worker Deployment (`backscroll worker`), which embeds new messages. It runs only with "
                "spec.embeddings: without a model it has nothing to do.")
    embeddings: Embeddings | None = Field(
        default=None, description="Semantic search. Absent: search is lexical, and no worker, embeddings server or "
                                  "backfill runs. Becomes the BACKSCROLL_EMBEDDINGS_* settings of the API, the worker "
                                  "and the backfill Jobs (never of the migration Job).")
    pod: PodSettings = Field(
        default_factory=PodSettings,
        description="Scheduling and metadata of every pod the operator creates (Deployments and Jobs), the base that "
                    "spec.api.pod, spec.worker.pod and spec.embeddings.server.pod add to.")
    network_policy: NetworkPolicy = filled_in(
        NetworkPolicy, "NetworkPolicies (networking.k8s.io/v1): NAME-api lets the API pods accept connections on "
                       "their Service's target port only; NAME-embeddings lets only this index's API, worker, "
                       "backfill and catch-up pods reach its embeddings servers. They take effect with a CNI that "
                       "enforces NetworkPolicies.")
    hibernate: bool = Field(
        default=False, description="Scale the API, the worker and the embeddings servers to zero (no HPA, no "
                                   "PodDisruptionBudget meanwhile); the data stays. Ready then reads False with reason "
                                   "Hibernated. false brings them back.")
    # docs/operator.md, "Deletion".
    deletion_policy: Literal["retain", "delete"] = Field(
        default="retain", description="What deleting the SearchIndex does to the database: retain keeps every row (no "
                                      "finalizer); delete runs `backscroll purge` behind the finalizer "
                                      f"{PURGE_FINALIZER} before the SearchIndex goes.")

    @property
    def hibernated(self) -> bool:
        """Scaled to zero on purpose: spec.hibernate, or an API of 0 replicas the operator manages."""
        return self.hibernate or (self.api.replicas == 0 and self.api.manage_replicas and self.api.autoscaling is None)


def unknown_fields(spec: dict | None) -> list[str]:
    """Paths of the fields in `spec` this operator version does not know (`spec.api.futureField`):
    ignored by `parse`, named here so the operator can say so once."""
    return sorted(_unknown(SearchIndexSpec, spec or {}, "spec"))


def _unknown(model: type[BaseModel], value, path: str) -> list[str]:
    if not isinstance(value, dict):
        return []
    known = {}
    for name, info in model.model_fields.items():
        known[name] = known[info.alias or name] = info.annotation
    found = []
    for key, item in value.items():
        if key not in known:
            found.append(f"{path}.{key}")
        elif (inner := _model_in(known[key])) is not None:
            found += _unknown(inner, item, f"{path}.{key}")
    return found


def _model_in(annotation) -> type[BaseModel] | None:
    """The model a field holds (`Server | None` -> Server); None for free-form maps and lists."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if (inner := _model_in(arg)) is not None:
            return inner
    return None


def _field_path(loc: tuple) -> str:
    return ".".join(["spec", *(str(p) for p in loc)])


def parse(spec: dict | None, registered: dict[str, int] | None = None) -> SearchIndexSpec:
    """The spec, or SpecError naming the first field that is wrong.

    `registered` maps models the index already stores vectors of to their dimensions (from the
    last status): a model's vectors cannot change size under the same name, so such a change is
    refused here even when the CRD's transition rule could not see it (delete and re-create).
    """
    try:
        parsed = SearchIndexSpec.model_validate(spec or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = err["loc"]
        message = err["msg"]
        if err["type"] == "value_error":  # a model validator: its message is the whole story
            message = message.removeprefix("Value error, ")
        raise SpecError(_field_path(loc), message) from None
    emb = parsed.embeddings
    if emb is not None and registered and emb.model in registered and registered[emb.model] != emb.dimensions:
        raise SpecError("spec.embeddings.dimensions",
                        f"model {emb.model!r} already stores {registered[emb.model]}-dimension vectors; "
                        f"a different size is a different model: give it a new name (e.g. "
                        f"{emb.model}@{emb.dimensions})")
    return parsed
