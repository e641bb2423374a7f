"""`SearchWorkspace`: a tenant as code. Its spec (the one model the CRD's schema is generated from),
the names and labels of what it owns, and its manifests as pure functions.

A SearchWorkspace names its SearchIndex (same namespace), the workspace (slug, display name, text
search configuration) and its tokens: each a kind, an agent scope where the kind has one, and the
Secret to write (optionally in another namespace the operator may write). The operator keeps every
token's secret in one Secret of its own (`<name>-tokens`, owned by the SearchWorkspace), registers
their digests with a Job (`backscroll workspaces apply`, the secrets in its environment through
secretKeyRefs, never in its arguments), and only then copies each secret into its target Secret.
docs/operator.md, "Tenants as code", walks through it; workspace_reconcile.py does it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from . import builders, crdgen
from .names import GROUP, HASH_ANNOTATION, Owner, child_name, labels, short_hash
from .spec import SearchIndexSpec, SpecError, _field_path, _Model

KIND = "SearchWorkspace"
PLURAL = "searchworkspaces"
SINGULAR = "searchworkspace"
CRD_NAME = f"{PLURAL}.{GROUP}"
# Held while the tokens may still be live (and, with deletionPolicy: delete, the data there):
# removed once the revoke (or erase) Job succeeded.
FINALIZER = f"{GROUP}/revoke-tokens"
# On every Secret the operator writes for a SearchWorkspace (its own and the targets): which one.
WORKSPACE_LABEL = f"{GROUP}/workspace"
WORKSPACE_NAMESPACE_LABEL = f"{GROUP}/workspace-namespace"
# On the operator's own Secret: where each token was delivered ({"token": "namespace/name"}). A
# delivered token whose target Secret is gone is rotated; an undeclared one's target is deleted.
DELIVERED_ANNOTATION = f"{GROUP}/delivered"
REGISTER = "workspace-register"
REVOKE = "workspace-revoke"
TOKENS_VARIABLE = "BACKSCROLL_WORKSPACE_TOKENS"
# `backscroll workspaces apply`'s exit status for a declaration no retry can apply (a retired slug,
# a revoked token's secret): backscroll.errors.DeclarationRefused.exit_code, which
# tests/operator/test_workspace_crd.py holds equal. The Job fails at once on it.
REFUSED_EXIT = 5

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
SLUG = r"^[a-z0-9][a-z0-9_-]{0,62}$"


class IndexRef(_Model):
    name: str = Field(min_length=1, max_length=63, pattern=DNS_SUBDOMAIN,
                      description="The SearchIndex (in this namespace) whose database holds the workspace.")


class TargetSecret(_Model):
    name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN,
                      description="The Secret the token is written to (created and owned by the operator).")
    namespace: str | None = Field(default=None, min_length=1, max_length=63, pattern=DNS_LABEL,
                                  description="Another namespace to write it in (default: this one). The operator "
                                              "needs the chart's operator.tokenNamespaces grant there.")
    key: str = Field(default="token", min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$",
                     description="The key holding the token (default: token).")


class WorkspaceToken(_Model):
    name: str = Field(min_length=1, max_length=40, pattern=DNS_LABEL,
                      description="The token's name, unique in this SearchWorkspace; registered as "
                                  "sw:NAMESPACE/SEARCHWORKSPACE/NAME.")
    kind: Literal["ingest", "runtime", "admin", "status"] = Field(
        description="ingest: a connector writing conversations; runtime: an agent runtime calling "
                    "search_history; admin: the admin API scoped to this workspace; status: GET /v1/status "
                    "alone (installation-wide).")
    agents: list[str] | None = Field(default=None, max_length=100,
                                     description="runtime: the agent slugs it may search (created in the workspace "
                                                 "when missing); omitted: every agent of the workspace.")
    secret: TargetSecret = Field(description="Where the token is delivered.")

    @field_validator("agents")
    @classmethod
    def _slugs(cls, value):
        import re

        for slug in value or []:
            if not re.match(SLUG, slug):
                raise ValueError(f"agent {slug!r} is not a slug (lower-case letters, digits, '-', '_')")
        return value

    @model_validator(mode="after")
    def _scope(self):
        if self.agents is not None and self.kind != "runtime":
            raise ValueError(f"agents scope runtime tokens only; this one is {self.kind}")
        return self


class SearchWorkspaceSpec(_Model):
    index_ref: IndexRef = Field(description="The SearchIndex this workspace lives in.")
    slug: str = Field(pattern=SLUG, description="The workspace's slug (an existing workspace with it is adopted).")
    display_name: str | None = Field(default=None, max_length=200, description="Display name (default: the slug).")
    text_search_config: str | None = Field(
        default=None, pattern=r"^[a-z_][a-z0-9_.]*$",
        description="A new workspace's text search configuration (default: simple); changing it later "
                    "rebuilds the workspace's documents in the background (`workspaces language`).")
    tokens: list[WorkspaceToken] = Field(default_factory=list, max_length=50,
                                         description="The tokens to mint and deliver.")
    deletion_policy: Literal["retain", "delete"] = Field(
        default="retain", description="retain: deleting the SearchWorkspace revokes its tokens and keeps the "
                                      "workspace's data. delete: deleting it revokes its tokens, then erases the "
                                      "workspace and all of its data (conversations, messages, memories, "
                                      "vectors, statistics) in batches (`backscroll workspaces erase`); there "
                                      "is no undo.")

    @model_validator(mode="after")
    def _checks(self):
        names = [t.name for t in self.tokens]
        if len(set(names)) != len(names):
            raise ValueError(f"token names repeat: {', '.join(sorted(names))}")
        targets = [(t.secret.namespace, t.secret.name, t.secret.key) for t in self.tokens]
        if len(set(targets)) != len(targets):
            raise ValueError("two tokens are delivered to the same Secret and key")
        return self


def parse(spec: dict | None) -> SearchWorkspaceSpec:
    try:
        parsed = SearchWorkspaceSpec.model_validate(spec or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise SpecError(_field_path(first["loc"]), first["msg"]) from None
    return parsed


# --- the CRD, from the model ---------------------------------------------------------------------

NAMES = crdgen.Names(kind=KIND, plural=PLURAL, singular=SINGULAR, short_name="sws")
COLUMNS = [
    {"name": "Index", "type": "string", "jsonPath": ".spec.indexRef.name",
     "description": "The SearchIndex the workspace lives in"},
    {"name": "Slug", "type": "string", "jsonPath": ".spec.slug"},
    {"name": "Tokens", "type": "string", "jsonPath": ".status.tokens",
     "description": "Tokens registered and delivered / declared"},
    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {"name": "Reason", "type": "string", "priority": 1,
     "jsonPath": '.status.conditions[?(@.type=="Ready")].reason'}]


class TokenStatus(_Model):
    name: str | None = None
    kind: str | None = None
    secret: str | None = None
    registered_at: str | None = Field(default=None, json_schema_extra=crdgen.DATE_TIME)


class SearchWorkspaceStatus(_Model):
    """What workspace_handlers publishes: Result.fields and the Ready condition."""

    observed_generation: int | None = None
    index: str | None = None
    slug: str | None = None
    tokens: str | None = Field(default=None, description="live tokens / declared tokens")
    registration_job: str | None = None
    conditions: list[crdgen.Condition] | None = crdgen.conditions()
    token_status: list[TokenStatus] | None = None


def crd() -> dict:
    """The SearchWorkspace CRD, as `make chart-sync` writes it to charts/backscroll/crds and
    k8s/base/crd (tests/operator/test_crd.py fails when the files drift from this)."""
    return crdgen.crd(NAMES, spec=SearchWorkspaceSpec, status=SearchWorkspaceStatus, columns=COLUMNS,
                      required=("spec",), spec_description="A Backscroll workspace and its tokens, as code.")


def crd_yaml() -> str:
    return crdgen.render(crd(), "operator/backscroll_operator/workspaces.py")


# --- names ------------------------------------------------------------------------------------

def prefix(ws: Owner) -> str:
    """What every token of this SearchWorkspace is named under in the database."""
    return f"sw:{ws.namespace}/{ws.name}/"


def tokens_secret_name(ws: Owner) -> str:
    return child_name(ws.name, "tokens")


def secret_labels(ws: Owner, component: str) -> dict[str, str]:
    return {**labels(ws.name, component), WORKSPACE_LABEL: ws.name, WORKSPACE_NAMESPACE_LABEL: ws.namespace}


def token_digest(secret: str) -> str:
    """A secret's SHA-256, as the database stores it: what a Job's name may depend on."""
    return hashlib.sha256(secret.encode()).hexdigest()


def env_name(index: int) -> str:
    return f"BACKSCROLL_TOKEN_{index}"


# --- manifests ----------------------------------------------------------------------------------

def _owned(manifest: dict, ws: Owner) -> dict:
    manifest["metadata"]["namespace"] = ws.namespace
    manifest["metadata"]["ownerReferences"] = [ws.reference()]
    return manifest


def tokens_secret(ws: Owner, values: dict[str, str], delivered: dict[str, str]) -> dict:
    """The operator's own Secret: every token's secret, by token name (generated by the
    reconciler: builders have no randomness), and where each was delivered."""
    return _owned({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                   "metadata": {"name": tokens_secret_name(ws), "labels": secret_labels(ws, "workspace-tokens"),
                                "annotations": {DELIVERED_ANNOTATION: json.dumps(delivered, sort_keys=True)}},
                   "stringData": dict(values)}, ws)


def target(ws: Owner, token: WorkspaceToken) -> tuple[str, str]:
    """Where a token is delivered: its Secret's namespace (the SearchWorkspace's by default) and name."""
    return token.secret.namespace or ws.namespace, token.secret.name


def target_secret(ws: Owner, token: WorkspaceToken, value: str) -> dict:
    """A token delivered: in the SearchWorkspace's namespace it is owned (garbage-collected with
    it); in another one no owner reference can point across, so the operator deletes it itself."""
    namespace, _ = target(ws, token)
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": token.secret.name, "namespace": namespace,
                           "labels": {**secret_labels(ws, "workspace-token"), f"{GROUP}/token": token.name},
                           "annotations": {f"{GROUP}/token-kind": token.kind}},
              "stringData": {token.secret.key: value}}
    if namespace == ws.namespace:
        secret["metadata"]["ownerReferences"] = [ws.reference()]
    return secret


def _described(spec: SearchWorkspaceSpec) -> list[dict]:
    return [{"name": t.name, "kind": t.kind, "agents": t.agents, "env": env_name(i)}
            for i, t in enumerate(spec.tokens)]


def registration_identity(ws: Owner, spec: SearchWorkspaceSpec, index: SearchIndexSpec, digests: dict[str, str]) -> str:
    """What a registration depends on: the declaration, the index's database and image, and each
    token's secret (by digest): any change is a new Job (a Job cannot change once created)."""
    return short_hash([spec.slug, spec.display_name, spec.text_search_config, _described(spec),
                       index.image, index.database.primary.name, index.database.primary.key,
                       [digests.get(t.name) for t in spec.tokens]])


def _job(ws: Owner, index: SearchIndexSpec, name: str, component: str, args: list[str], env: list[dict],
         **annotations: str) -> dict:
    container = builders._container(index, "workspace", args, builders._database_env(index) + env)
    container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    job = builders._job(name, ws, component, container, backoff_limit=6,
                        settings=builders.pod_settings(index.pod), **annotations)
    job["spec"]["podFailurePolicy"] = {"rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": "workspace", "operator": "In",
                                              "values": [REFUSED_EXIT]}}]}
    job["metadata"]["labels"].update({WORKSPACE_LABEL: ws.name})
    job = _owned(job, ws)
    job["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = short_hash(job, 16)
    return job


def register_job(ws: Owner, spec: SearchWorkspaceSpec, index: SearchIndexSpec, digests: dict[str, str]) -> dict:
    """`backscroll workspaces apply`: the workspace created or adopted, each token registered from
    its secretKeyRef into the operator's Secret (the digest is what the database keeps), the
    undeclared revoked. Nothing secret in its arguments or its JSON description."""
    identity = registration_identity(ws, spec, index, digests)
    args = ["workspaces", "apply", "--slug", spec.slug, "--prefix", prefix(ws), "--tokens-from-env"]
    if spec.display_name:
        args += ["--name", spec.display_name]
    if spec.text_search_config:
        args += ["--ts-config", spec.text_search_config]
    env = [{"name": TOKENS_VARIABLE, "value": json.dumps(_described(spec), separators=(",", ":"))}]
    env += [{"name": env_name(i), "valueFrom": {"secretKeyRef": {"name": tokens_secret_name(ws), "key": t.name}}}
            for i, t in enumerate(spec.tokens)]
    return _job(ws, index, child_name(ws.name, "register", identity), REGISTER, args, env)


def revoke_job(ws: Owner, index: SearchIndexSpec, erase: str | None = None) -> dict:
    """`backscroll workspaces revoke-declared`: every token of the SearchWorkspace revoked as it goes.
    With `erase` (the slug of a SearchWorkspace whose deletionPolicy is delete), `backscroll workspaces
    erase` instead: the same tokens revoked first, then the workspace and its data erased. Named
    after what it does, so switching the policy while the deletion waits makes another Job."""
    if erase is None:
        return _job(ws, index, child_name(ws.name, "revoke", short_hash([ws.uid, index.image])), REVOKE,
                    ["workspaces", "revoke-declared", "--prefix", prefix(ws)], [])
    return _job(ws, index, child_name(ws.name, "erase", short_hash([ws.uid, index.image, erase])), REVOKE,
                ["workspaces", "erase", erase, "--yes-erase-workspace-data", "--revoke-prefix", prefix(ws)], [])


def erased_slug(body: dict) -> str | None:
    """The slug a deleted SearchWorkspace's data is erased from: its spec's, when deletionPolicy is
    delete (read from the stored object, which the CRD's schema validated); None keeps the data."""
    spec = body.get("spec") or {}
    return spec.get("slug") if spec.get("deletionPolicy") == "delete" and spec.get("slug") else None

