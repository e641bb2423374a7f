"""The SearchIndex spec as the operator reads it: parsed, defaulted and checked.

The CRD's schema and CEL rules refuse most mistakes at `kubectl apply` time, but an API server
without them (an old cluster, a CRD applied by hand without its rules) would let them through, so
the same rules live here too and name the field they concern. Defaults mirror the CRD's:
`tests/operator/test_crd.py` holds the two in step.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

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


class SecretKeyRef(_Model):
    name: str = Field(min_length=1)
    key: str = Field(min_length=1)


class DatabaseRef(_Model):
    name: str = Field(min_length=1)
    key: str = "uri"


class TokenRef(_Model):
    name: str = Field(min_length=1)
    key: str = "token"


class CnpgClusterRef(_Model):
    """A CloudNativePG Cluster in the same namespace: its `<name>-app` Secret (key `uri`) is the
    database URL, and reads go to the Service `readService` names (`<name>-ro` by default)."""

    name: str = Field(min_length=1, max_length=50)
    # ro: replicas only (needs instances >= 2); r: any instance; rw: the primary (no replica reads).
    read_service: Literal["ro", "r", "rw"] = "ro"
    port: int = Field(default=5432, ge=1, le=65535)

    @property
    def app_secret(self) -> DatabaseRef:
        return DatabaseRef(name=f"{self.name}-app", key="uri")


class Database(_Model):
    secret_ref: DatabaseRef | None = None
    read_replica_secret_ref: DatabaseRef | None = None
    cnpg_cluster_ref: CnpgClusterRef | None = None
    # A CloudNativePG Backup of the cluster, completed before each new migration Job starts.
    backup_before_migration: bool = False
    backup_method: Literal["barmanObjectStore", "volumeSnapshot"] = "barmanObjectStore"

    @model_validator(mode="after")
    def _one_source(self) -> Database:
        if (self.secret_ref is None) == (self.cnpg_cluster_ref is None):
            raise ValueError("give either secretRef or cnpgClusterRef")
        if self.cnpg_cluster_ref is not None and self.read_replica_secret_ref is not None:
            raise ValueError("cnpgClusterRef chooses the read service itself (readService): "
                             "drop readReplicaSecretRef")
        if self.backup_before_migration and self.cnpg_cluster_ref is None:
            raise ValueError("backupBeforeMigration backs up a CloudNativePG cluster: it needs cnpgClusterRef")
        return self

    @property
    def primary(self) -> DatabaseRef:
        """The Secret key holding the primary's URL, wherever it comes from."""
        return self.secret_ref or self.cnpg_cluster_ref.app_secret


# A Kubernetes resource quantity (apimachinery's resource.Quantity): `500m`, `1.5`, `512Mi`, `1e3`.
QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
                    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
# YAML's `cpu: 2` is a number: read as the string "2", then checked as any other quantity.
Quantity = Annotated[str, BeforeValidator(lambda v: str(v) if isinstance(v, int | float) and not isinstance(v, bool)
                                          else v), Field(pattern=QUANTITY_PATTERN)]


class ResourceRequirements(_Model):
    """A container's resources; absent, the component's defaults (builders.DEFAULT_RESOURCES)."""

    requests: dict[str, Quantity] | None = None
    limits: dict[str, Quantity] | None = None


class PodSettings(_Model):
    """Scheduling and metadata of a component's pods. `spec.pod` applies to every pod the operator
    creates (Jobs included); `spec.api.pod`, `spec.worker.pod` and `spec.embeddings.server.pod`
    add to it for their own pods (their maps win key by key, lists are appended)."""

    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    affinity: dict[str, Any] | None = None
    # None: spread across nodes and zones (maxSkew 1, ScheduleAnyway); []: no spreading.
    topology_spread_constraints: list[dict[str, Any]] | None = None
    image_pull_secrets: list[str] = Field(default_factory=list)
    annotations: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    priority_class_name: str | None = None


class Autoscaling(_Model):
    """A HorizontalPodAutoscaler (autoscaling/v2) on CPU for the API; the Deployment's replicas
    are then the HPA's."""

    min_replicas: int = Field(default=2, ge=1)
    max_replicas: int = Field(default=10, ge=1)
    target_cpu_utilization_percentage: int = Field(default=70, ge=1, le=100, alias="targetCPUUtilizationPercentage")

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        if self.max_replicas < self.min_replicas:
            raise ValueError("maxReplicas must be at least minReplicas")
        return self


class Service(_Model):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    port: int = Field(default=8080, ge=1, le=65535)


class Api(_Model):
    replicas: int = Field(default=2, ge=0)
    # False leaves spec.replicas of the Deployment to whoever else manages it (an HPA, KEDA):
    # the operator's applied configuration then omits the field, so it never reverts their scale.
    manage_replicas: bool = True
    image: str | None = None
    resources: ResourceRequirements | None = None
    service: Service = Field(default_factory=Service)
    status_token_secret_ref: TokenRef | None = None
    autoscaling: Autoscaling | None = None
    pod: PodSettings = Field(default_factory=PodSettings)


class Worker(_Model):
    replicas: int = Field(default=1, ge=0)
    manage_replicas: bool = True
    resources: ResourceRequirements | None = None
    pod: PodSettings = Field(default_factory=PodSettings)


class ModelCache(_Model):
    size_limit: str = "10Gi"
    claim_name: str | None = None


class ModelVolume(_Model):
    claim_name: str = Field(min_length=1)


class ModelSource(_Model):
    """Where the server gets its weights: the Hugging Face Hub by default; a mirror (HF_ENDPOINT),
    a token for gated models (HF_TOKEN), or a pre-populated claim read offline."""

    mirror_url: str | None = Field(default=None, pattern=r"^https?://")
    token_secret_ref: SecretKeyRef | None = None
    volume: ModelVolume | None = None


# The CRD's CEL rule on `server` says the same, word for word (tests/operator/test_tei_volumes.py).
MULTI_ATTACH = (
    "modelCache.claimName with 2 or more replicas: every replica would mount the claim read-write, and a "
    "ReadWriteOnce claim attaches to one node only (Multi-Attach errors). Run one replica, drop claimName "
    "(each pod then caches in an emptyDir), or put the weights on a ReadOnlyMany or ReadWriteMany claim "
    "given as modelSource.volume.")


class Server(_Model):
    image: str = DEFAULT_SERVER_IMAGE
    model_id: str | None = None
    args: list[str] = Field(default_factory=list)
    replicas: int = Field(default=1, ge=1)
    resources: ResourceRequirements | None = None
    port: int = Field(default=80, ge=1, le=65535)
    model_cache: ModelCache = Field(default_factory=ModelCache)
    model_source: ModelSource = Field(default_factory=ModelSource)
    startup_timeout_seconds: int = Field(default=900, ge=30)
    pod: PodSettings = Field(default_factory=PodSettings)

    @model_validator(mode="after")
    def _one_volume(self) -> Server:
        if self.model_source.volume is not None and self.model_cache.claim_name is not None:
            raise ValueError("modelSource.volume replaces modelCache: drop modelCache.claimName")
        if self.replicas >= 2 and self.model_cache.claim_name is not None:
            raise ValueError(MULTI_ATTACH)
        return self


class External(_Model):
    url: str = Field(pattern=r"^https?://")
    api_key_secret_ref: SecretKeyRef | None = None


class Backfill(_Model):
    rate: float = Field(default=0.0, ge=0)
    batch_size: int = Field(default=32, ge=1, le=2048)
    backoff_limit: int = Field(default=6, ge=0)


class Rollout(_Model):
    # The share of indexable messages the new model must cover before search switches to it.
    min_coverage: float = Field(default=1.0, ge=0, le=1)
    # Keep the superseded model's vectors (a rollback is then a catch-up, not a re-embedding);
    # false deletes them once the new model serves.
    retain_previous: bool = True


class Embeddings(_Model):
    model: str = Field(min_length=1, max_length=200)
    dimensions: int = Field(ge=1, le=MAX_DIMENSIONS)
    query_model: str | None = None
    document_model: str | None = None
    query_prefix: str = ""
    document_prefix: str = ""
    send_input_type: bool = False
    send_dimensions: bool = False
    batch_size: int = Field(default=32, ge=1, le=2048)
    server: Server | None = None
    external: External | None = None
    backfill: Backfill = Field(default_factory=Backfill)
    rollout: Rollout = Field(default_factory=Rollout)

    @model_validator(mode="after")
    def _one_endpoint(self) -> Embeddings:
        if self.server is not None and self.external is not None:
            raise ValueError("give either server or external, not both")
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
    method: Literal["bm25", "ts_rank_cd"] = "bm25"
    k1: float = Field(default=1.2, ge=0, le=10)
    b: float = Field(default=0.3, ge=0, le=1)
    speaker_weight: float = Field(default=1.0, ge=0, le=4)
    candidate_pool: int = Field(default=500, ge=0, le=100_000)


class NetworkPolicy(_Model):
    enabled: bool = True


class SearchIndexSpec(_Model):
    image: str = Field(min_length=1)
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    database: Database
    text_search_config: str = Field(default="multilingual", pattern=r"^[a-z_][a-z0-9_.]*$")
    ranking: Ranking = Field(default_factory=Ranking)
    api: Api = Field(default_factory=Api)
    worker: Worker = Field(default_factory=Worker)
    embeddings: Embeddings | None = None
    pod: PodSettings = Field(default_factory=PodSettings)
    network_policy: NetworkPolicy = Field(default_factory=NetworkPolicy)
    # Scales the API, the worker and the embeddings servers to zero; the data stays.
    hibernate: bool = False
    # What deleting the SearchIndex does to the database: retain (default) leaves every row;
    # delete runs `backscroll purge` first, behind a finalizer (docs/operator.md, "Deletion").
    deletion_policy: Literal["retain", "delete"] = "retain"


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
