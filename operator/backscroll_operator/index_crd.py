"""The SearchIndex CRD, generated: its spec from spec.py's model, its status from the models
below, its printer columns and the rule on its name. `make chart-sync` writes it to
charts/backscroll/crds and k8s/base/crd; tests/operator/test_crd.py fails when they drift.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from . import crdgen, rollout
from .crdgen import NULLABLE, Condition, Names, Rule
from .spec import SearchIndexSpec, _Model
from .status import CONDITIONS

NAMES = Names(kind="SearchIndex", plural="searchindexes", singular="searchindex", short_name="sidx")
SOURCE = "operator/backscroll_operator/spec.py and index_crd.py"

# The name becomes the children's names (a Service's is a DNS-1035 label) and their
# app.kubernetes.io/instance label (63 characters at most); longer child names are cut with a hash
# by the operator.
NAME_IS_A_LABEL = Rule(
    "self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
    "metadata.name must be a DNS-1035 label of at most 63 characters (lowercase letters, digits and '-', starting "
    "with a letter, ending with a letter or digit): it names the index's Services and labels its children")

DESCRIPTION = ("A Backscroll installation: its database, API, worker and, optionally, semantic search through an "
               "embeddings server. The operator runs the migrations, the API, the worker, the embeddings server and "
               "one backfill per model, and reports mode and coverage.")
SPEC_DESCRIPTION = ("What to run. Changing it rolls the Deployments out; a new image or model runs a new migration "
                    "Job.")

_READY = '.status.conditions[?(@.type=="Ready")]'
COLUMNS = [
    {"name": "Mode", "type": "string", "jsonPath": ".status.mode",
     "description": "hybrid (lexical + vectors), lexical (no embeddings configured), degraded (configured, not fully "
                    "usable) or hibernated (scaled to zero)"},
    {"name": "Model", "type": "string", "jsonPath": ".status.model",
     "description": "The embedding model search uses now (during a rollout, the one being replaced)"},
    {"name": "Coverage", "type": "string", "jsonPath": ".status.coverage",
     "description": "Share of indexable messages that have a vector of the current model"},
    {"name": "Ready", "type": "string", "jsonPath": f"{_READY}.status",
     "description": "Search answers the way the spec asks (see the Ready condition's reason otherwise)"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {"name": "Rollout", "type": "string", "priority": 1, "jsonPath": ".status.rollout.phase",
     "description": "The model rollout's phase (Complete when nothing is rolling out)"},
    {"name": "Target", "type": "string", "priority": 1, "jsonPath": ".status.rollout.targetModel",
     "description": "The model being rolled out (spec.embeddings.model)"},
    {"name": "Reason", "type": "string", "priority": 1, "jsonPath": f"{_READY}.reason",
     "description": "The Ready condition's reason (Ready, Backfilling, ModelRollingOut, SecretMissing, ...)"},
]


# --- the status, as the operator writes it (status.py) -------------------------------------------

class Migration(_Model):
    job: str | None = Field(default=None, description="The current attempt's Job.")
    attempt: int | None = Field(
        default=None, description="The current attempt, from 1; it starts again for a new image, model or database.")
    identity: str | None = Field(
        default=None, description="The hash in the Job's name, of the image, the model and the database.")
    database: str | None = Field(
        default=None,
        description="Which database it migrates (the Secret or the CloudNativePG cluster, with its uid).")
    failed_attempt: int | None = Field(default=None, json_schema_extra=NULLABLE,
                                       description="The last attempt that failed.")
    last_error: str | None = Field(
        default=None, json_schema_extra=NULLABLE,
        description="The first line of that attempt's error (its pod's termination message).")
    retry_at: str | None = Field(default=None, json_schema_extra=NULLABLE,
                                 description="When the next attempt starts (RFC 3339), while the last one failed.")


class StoredModel(_Model):
    model: str | None = Field(default=None, description="Stored model name.")
    dimensions: int | None = Field(default=None, description="Vector size.")
    embedded: int | None = Field(default=None, description="Messages with a vector of this model.")
    total: int | None = Field(default=None, description="Indexable messages.")
    coverage: float | None = Field(default=None, description="embedded / total (1 when there are none).")
    current: bool | None = Field(default=None, description="Whether search uses this model.")
    role: Literal["serving", "target", "previous", "retained"] | None = Field(
        default=None, description="serving (search uses it), target (being rolled out), previous (superseded by the "
                                  "last rollout) or retained.")


class RolloutStatus(_Model):
    phase: Literal[rollout.MIGRATING, rollout.BACKFILLING, rollout.CATCHING_UP, rollout.SWITCHING,
                   rollout.COMPLETE, rollout.LEXICAL] | None = Field(default=None,
                                                                     description="Where the rollout stands.")
    serving_model: str | None = Field(default=None, json_schema_extra=NULLABLE,
                                      description="The model the API serves.")
    target_model: str | None = Field(default=None, json_schema_extra=NULLABLE, description="spec.embeddings.model.")
    worker_model: str | None = Field(default=None, json_schema_extra=NULLABLE,
                                     description="The model the worker embeds new messages with.")
    previous_model: str | None = Field(
        default=None, json_schema_extra=NULLABLE,
        description="The model the last rollout replaced (pruned when retainPrevious is false).")
    waiting_for: str | None = Field(default=None, json_schema_extra=NULLABLE,
                                    description="What the phase waits for, in words.")


class SearchIndexStatus(_Model):
    observed_generation: int | None = Field(default=None, description="The metadata.generation this status describes.")
    operator_version: str | None = Field(
        default=None, description="The operator version that wrote this status. A new version judges every "
                                  "SearchIndex again once, one it refused (InvalidSpec) included.")
    migration: Migration | None = Field(
        default=None, description="The migration of the spec's image, model and database: its Job, which attempt, "
                                  "and why the last one failed. A failed attempt is retried after a backoff by a new "
                                  "Job (a new attempt).")
    mode: Literal["hybrid", "lexical", "degraded", "hibernated"] | None = Field(
        default=None, description="How search answers now, from the API's GET /v1/status.")
    model: str | None = Field(default=None,
                              description="The model search uses now (during a rollout, the one being replaced).")
    coverage: str | None = Field(
        default=None, description="The current model's coverage as a percentage, for the printer column.")
    models: list[StoredModel] | None = Field(
        default=None, description="Every model the database holds vectors of, from the API's GET /v1/status.")
    rollout: RolloutStatus | None = Field(default=None, description="The model rollout, phase by phase.")
    conditions: list[Condition] | None = crdgen.conditions(f"{', '.join(CONDITIONS[:-1])} and {CONDITIONS[-1]}.")


def crd() -> dict:
    return crdgen.crd(NAMES, spec=SearchIndexSpec, spec_description=SPEC_DESCRIPTION, status=SearchIndexStatus,
                      status_description="What the operator observed; written by the operator only.",
                      columns=COLUMNS, root={"description": DESCRIPTION, **crdgen.validations(NAME_IS_A_LABEL)})


def crd_yaml() -> str:
    return crdgen.render(crd(), SOURCE)
