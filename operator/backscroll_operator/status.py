"""A SearchIndex's status, derived from what the operator observed: pure, so tests feed it facts.

The API's own `GET /v1/status` is the authority on mode and coverage (it probes the embeddings
endpoint and counts vectors in the database); the children's Kubernetes status says what the
API cannot: a migration still running, an embeddings server still loading its weights, a
rollout in progress. Ready means "search answers the way the spec asks": lexical for a spec
without embeddings, hybrid with them; anything less is Ready=False with a reason, so
`kubectl wait --for=condition=Ready` gates on a finished rollout, backfill included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import rollout
from .rollout import Plan
from .spec import SearchIndexSpec

CONDITIONS = ("MigrationsApplied", "EmbeddingsAvailable", "BackfillComplete", "Ready")

# The reason of a condition that does not apply to this spec (lexical: EmbeddingsAvailable and
# BackfillComplete): its status is Unknown, not False, so that nothing reads "not applicable" as
# "broken" (`kubectl wait --for=condition=EmbeddingsAvailable=False` does not fire for it).
NOT_APPLICABLE = "NotApplicable"

# Reasons that mean something is wrong rather than still under way: their Events are Warnings.
WARNING_REASONS = frozenset({
    "InvalidSpec", "SecretMissing", "MigrationFailed", "BackfillFailed", "EndpointUnavailable",
    "EndpointTimeout", "StatusUnreadable", "Degraded", "NameConflict", "PurgeFailed",
    "SchemaNewerThanImage", "DatabaseOwnedElsewhere", "BackupFailed",
})

# How `backscroll` refuses a database (backscroll/errors.py: SchemaNewerThanImage and
# DatabaseOwnedElsewhere's exit_code), and the reason each becomes: no retry mends either, a person
# must, so the Jobs fail at once on them (builders.refusals) and the status says which.
EXIT_REASONS = {3: "SchemaNewerThanImage", 4: "DatabaseOwnedElsewhere"}
REFUSED = {
    "SchemaNewerThanImage": "the database's schema is newer than spec.image: a later release applied a contract "
                            "migration this image does not know, so its API and worker would not start; set "
                            "spec.image to that release or later (docs/upgrades.md, Rollback)",
    "DatabaseOwnedElsewhere": "the database belongs to another SearchIndex (recorded at its migration); this one "
                              "neither migrates, prunes nor purges it. Point spec.database at a database of its own",
}
# The Job controller's message when a podFailurePolicy rule fails the Job (Kubernetes'
# pod_failure_policy.go): "Container C for pod NS/P failed with exit code N matching FailJob rule at index I".
FAILED_WITH = re.compile(r"failed with exit code (\d+) matching FailJob rule")


@dataclass(frozen=True)
class JobState:
    name: str
    phase: str  # absent | running | succeeded | failed
    exit_code: int | None = None  # a failed Job's, when a podFailurePolicy rule failed it

    @classmethod
    def of(cls, name: str, job: dict | None) -> JobState:
        if job is None:
            return cls(name, "absent")
        status = job.get("status") or {}
        for cond in status.get("conditions") or []:
            if cond.get("status") == "True" and cond.get("type") in ("Complete", "SuccessCriteriaMet"):
                return cls(name, "succeeded")
            if cond.get("status") == "True" and cond.get("type") in ("Failed", "FailureTarget"):
                code = FAILED_WITH.search(cond.get("message") or "")
                return cls(name, "failed", int(code.group(1)) if code else None)
        return cls(name, "succeeded" if (status.get("succeeded") or 0) >= 1 else "running")


@dataclass(frozen=True)
class DeploymentState:
    name: str
    desired: int
    available: int
    rolled_out: bool  # the controller has seen the latest spec and replaced every old pod

    @classmethod
    def of(cls, name: str, deployment: dict | None) -> DeploymentState:
        if deployment is None:
            return cls(name, 0, 0, False)
        desired = (deployment.get("spec") or {}).get("replicas", 1)
        status = deployment.get("status") or {}
        generation = (deployment.get("metadata") or {}).get("generation")
        observed = status.get("observedGeneration")
        current = generation is None or (observed is not None and observed >= generation)
        # A real API server leaves updatedReplicas out while it is 0; replicas counts old pods too,
        # so a rollout is done only when every pod is an updated one.
        updated = status.get("updatedReplicas") or 0
        total = status.get("replicas", updated) or 0
        return cls(name, desired, status.get("availableReplicas") or 0,
                   current and updated >= desired and total <= updated and not status.get("unavailableReplicas"))

    @property
    def ready(self) -> bool:
        return self.desired > 0 and self.rolled_out and self.available >= self.desired

    @property
    def settled(self) -> bool:
        """Every pod runs the live manifest: rolled out and ready, or scaled to zero."""
        return self.rolled_out and (self.desired == 0 or self.ready)

    def describe(self) -> str:
        if not self.rolled_out and self.available >= self.desired > 0:
            return f"deployment {self.name} is rolling out"
        return f"deployment {self.name} has {self.available} of {self.desired} replicas available"


@dataclass(frozen=True)
class Facts:
    """What one reconcile pass saw."""

    migration: JobState
    api: DeploymentState
    worker: DeploymentState | None = None      # None: no worker wanted (no embeddings)
    server: DeploymentState | None = None      # None: no in-cluster server wanted
    backfill: JobState | None = None           # None: no embeddings
    report: dict | None = None                 # the API's GET /v1/status, when it answered
    report_error: str | None = None            # why it did not
    migration_record: dict | None = None       # the status' migration block (attempt, last error)
    database_waiting: str | None = None        # why the migration has not started (a CNPG cluster not Ready)
    backup: tuple[str, str] | None = None      # (reason, message) of the pre-migration backup it waits for
    notes: list[str] = field(default_factory=list)


def _condition(type_: str, ok: bool | None, reason: str, message: str) -> dict:
    status = "Unknown" if ok is None else ("True" if ok else "False")
    return {"type": type_, "status": status, "reason": reason, "message": message}


def _percent(coverage: float | None) -> str | None:
    if coverage is None:
        return None
    return f"{coverage * 100:.1f}%".replace(".0%", "%")


def _current_model(report: dict | None, model: str) -> dict | None:
    for entry in (report or {}).get("models") or []:
        if entry.get("model") == model:
            return entry
    return None


def _mode(spec: SearchIndexSpec, facts: Facts) -> str:
    if spec.hibernated:
        return "hibernated"  # no API pod: search answers nothing, which is neither mode
    if spec.embeddings is None:
        # Pods still rolling out may answer hybrid for a while; the report says so when it can.
        return (facts.report or {}).get("mode", "lexical") if facts.report else "lexical"
    if facts.report is None or (facts.server is not None and not facts.server.ready):
        return "degraded"
    mode = facts.report.get("mode")
    # "lexical" from an API configured with a model means its pods predate the model.
    return "hybrid" if mode == "hybrid" else "degraded"


def attempt_failed(record: dict) -> str:
    """What the last failed attempt of a migration said, and when the next one starts."""
    then = f"; attempt {record['failedAttempt'] + 1} at {record['retryAt']}" if record.get("retryAt") else ""
    return f"attempt {record['failedAttempt']} failed: {record.get('lastError')}{then}"


def _migrations(facts: Facts) -> dict:
    job, record = facts.migration, facts.migration_record or {}
    if job.phase == "failed" and job.exit_code in EXIT_REASONS:
        reason = EXIT_REASONS[job.exit_code]
        return _condition("MigrationsApplied", False, reason, f"job {job.name}: {REFUSED[reason]}")
    if job.phase == "absent" and facts.backup is not None:
        return _condition("MigrationsApplied", False, *facts.backup)
    attempt = record.get("attempt") or 1
    before = f" (attempt {attempt}; {attempt_failed(record)})" if record.get("failedAttempt") else ""
    if job.phase == "succeeded":
        return _condition("MigrationsApplied", True, "Succeeded", f"job {job.name} succeeded"
                          + (f" (attempt {attempt})" if attempt > 1 else ""))
    if job.phase == "failed":
        return _condition("MigrationsApplied", False, "MigrationFailed", f"job {job.name}: "
                          + (attempt_failed(record) if record.get("failedAttempt") == attempt else "failed"))
    if job.phase == "absent" and facts.database_waiting:
        return _condition("MigrationsApplied", False, "WaitingForDatabase",
                          f"the migration waits for its database: {facts.database_waiting}")
    return _condition("MigrationsApplied", False, "Running", f"job {job.name} is running{before}")


def _embeddings(spec: SearchIndexSpec, facts: Facts, plan: Plan) -> dict:
    if spec.embeddings is None:
        return _condition("EmbeddingsAvailable", None, NOT_APPLICABLE, "spec.embeddings is not set: search is lexical")
    if facts.server is not None and not facts.server.ready:
        return _condition("EmbeddingsAvailable", False, "ServerNotReady", facts.server.describe())
    if facts.report is None:
        return _condition("EmbeddingsAvailable", None, "StatusUnreadable", facts.report_error or "no status yet")
    endpoint = (facts.report.get("embeddings") or {}).get("endpoint")
    if endpoint is None:
        return _condition("EmbeddingsAvailable", False, "RollingOut", "the API does not use the model yet")
    if endpoint != "ok":
        reason = "EndpointTimeout" if endpoint == "timeout" else "EndpointUnavailable"
        return _condition("EmbeddingsAvailable", False, reason, f"the embeddings endpoint answers: {endpoint}")
    serving = plan.api.model if plan.api is not None else spec.embeddings.model
    return _condition("EmbeddingsAvailable", True, "Available", f"the embeddings endpoint answers for {serving}")


def _backfill(spec: SearchIndexSpec, facts: Facts) -> dict:
    if spec.embeddings is None or facts.backfill is None:
        return _condition("BackfillComplete", None, NOT_APPLICABLE, "spec.embeddings is not set: nothing to embed")
    job = facts.backfill
    entry = _current_model(facts.report, spec.embeddings.model)
    counts = f" ({entry['embedded']} of {entry['total']} messages embedded)" if entry else ""
    if job.phase == "absent":
        return _condition("BackfillComplete", False, "WaitingForMigrations",
                          f"job {job.name} starts once the migrations are applied")
    if job.phase == "failed":
        return _condition("BackfillComplete", False, "BackfillFailed",
                          f"job {job.name} failed{counts}: see `kubectl logs job/{job.name}`; "
                          f"delete the job to run it again")
    if job.phase == "running":
        return _condition("BackfillComplete", False, "Backfilling", f"job {job.name} is running{counts}")
    return _condition("BackfillComplete", True, "Complete", f"job {job.name} succeeded{counts}")


def _rolling_out(spec: SearchIndexSpec, plan: Plan) -> str | None:
    """Why a model rollout keeps the index from Ready, or None."""
    if spec.embeddings is None or plan.phase not in (rollout.BACKFILLING, rollout.CATCHING_UP, rollout.SWITCHING,
                                                     rollout.MIGRATING):
        return None
    serving = plan.api.model if plan.api is not None else None
    if serving == spec.embeddings.model and plan.phase not in (rollout.CATCHING_UP, rollout.SWITCHING):
        return None  # a first model: the conditions below say how far it is
    if plan.phase == rollout.SWITCHING:
        return f"Switching: search moves to {spec.embeddings.model}; waiting for {plan.waiting}"
    return (f"{plan.phase}: search serves {serving}, rolling out {spec.embeddings.model}; "
            f"waiting for {plan.waiting}")


def _ready(spec: SearchIndexSpec, facts: Facts, mode: str, conditions: dict[str, dict], plan: Plan) -> dict:
    migrations = conditions["MigrationsApplied"]
    if migrations["status"] != "True":
        reason = migrations["reason"] if migrations["reason"] in ("MigrationFailed", "WaitingForDatabase",
                                                                  "BackingUp", "BackupFailed", *REFUSED) \
            else "WaitingForMigrations"
        return _condition("Ready", False, reason, migrations["message"])
    if spec.hibernated:
        # Asked for: no pods answer, and that is no fault (no Warning Event, not ApiNotReady).
        cause = "spec.hibernate is true" if spec.hibernate else "spec.api.replicas is 0"
        return _condition("Ready", False, "Hibernated", f"{cause}: the API, worker and embeddings servers are "
                          f"scaled to zero; the data stays" if spec.hibernate else f"{cause}: no API pod serves")
    for role, state in (("Api", facts.api), ("Worker", facts.worker)):
        if state is not None and not state.ready:
            return _condition("Ready", False, f"{role}NotReady", state.describe())
    if facts.report is None:
        return _condition("Ready", False, "StatusUnreadable", facts.report_error or "no status yet")
    if spec.embeddings is None:
        if mode != "lexical":
            return _condition("Ready", False, "RollingOut", "the API still answers with the previous model")
        return _condition("Ready", True, "Ready", "search answers lexically")
    rolling = _rolling_out(spec, plan)
    if rolling is not None:
        return _condition("Ready", False, "ModelRollingOut", rolling)
    if mode != "hybrid":
        cause = conditions["EmbeddingsAvailable"]
        if cause["status"] == "True":
            cause = conditions["BackfillComplete"]
        degradation = facts.report.get("degradation") or {}
        if cause["status"] == "True" and degradation:
            return _condition("Ready", False, "Degraded",
                              f"{degradation.get('category')}: {degradation.get('detail', '')}".strip())
        if cause["status"] == "True":
            # Nothing is wrong or under way on this side, the API's last report lags behind it:
            # not a copy of BackfillComplete's "Complete" on a Ready that is False.
            return _condition("Ready", False, "WaitingForHybrid",
                              f"{cause['message']}; the API last reported {facts.report.get('mode') or mode} search, its next "
                              "report should say hybrid")
        return _condition("Ready", False, cause["reason"], cause["message"])
    return _condition("Ready", True, "Ready", f"search answers hybrid with {spec.embeddings.model}")


def _role(model: str, spec: SearchIndexSpec, plan: Plan) -> str:
    if plan.api is not None and model == plan.api.model:
        return "serving"
    if spec.embeddings is not None and model == spec.embeddings.model:
        return "target"
    return "previous" if model == plan.previous else "retained"


def _models(report: dict | None, previous: list | None, spec: SearchIndexSpec, plan: Plan) -> list[dict] | None:
    if report is None:
        return previous  # last known coverage beats none while the API does not answer
    return [{"model": m["model"], "dimensions": m["dimensions"], "embedded": m["embedded"], "total": m["total"],
             "coverage": m["coverage"], "current": bool(m.get("current")), "role": _role(m["model"], spec, plan)}
            for m in report.get("models") or []]


def _rollout(spec: SearchIndexSpec, plan: Plan) -> dict | None:
    if spec.embeddings is None and plan.previous is None:
        return None
    return {"phase": plan.phase, "servingModel": plan.api.model if plan.api else None,
            "targetModel": spec.embeddings.model if spec.embeddings else None,
            "workerModel": plan.worker.model if plan.worker else None,
            "previousModel": plan.previous, "catchUpOwed": plan.catchup_owed, "waitingFor": plan.waiting or None}


def merge_conditions(old: list | None, new: list[dict], now: str, generation: int | None = None) -> list[dict]:
    """New conditions, keeping lastTransitionTime where the status did not change; each new one
    carries the metadata.generation it was computed for (observedGeneration, as in metav1.Condition)."""
    before = {c["type"]: c for c in old or []}
    merged = []
    for cond in new:
        prior = before.get(cond["type"])
        changed = prior is None or prior.get("status") != cond["status"]
        cond = {**cond, "lastTransitionTime": now if changed else prior.get("lastTransitionTime", now)}
        if generation is not None:
            cond["observedGeneration"] = generation
        merged.append(cond)
    # Conditions this pass did not compute (e.g. after a spec error) are kept as they were, their
    # observedGeneration included: they still describe the generation they were computed for.
    seen = {c["type"] for c in new}
    merged += [c for c in old or [] if c["type"] not in seen]
    return sorted(merged, key=lambda c: CONDITIONS.index(c["type"]) if c["type"] in CONDITIONS else 99)


def derive(spec: SearchIndexSpec, facts: Facts, generation: int | None, old: dict | None, now: str,
           plan: Plan) -> dict:
    """The whole status for a spec the operator could act on."""
    old = old or {}
    mode = _mode(spec, facts)
    conditions = {"MigrationsApplied": _migrations(facts), "EmbeddingsAvailable": _embeddings(spec, facts, plan),
                  "BackfillComplete": _backfill(spec, facts)}
    conditions["Ready"] = _ready(spec, facts, mode, conditions, plan)
    models = _models(facts.report, old.get("models"), spec, plan)
    model = plan.api.model if plan.api is not None else (spec.embeddings.model if spec.embeddings else None)
    current = next((m for m in models or [] if m["model"] == model), None)
    return {
        "observedGeneration": generation,
        "mode": mode,
        # Flat copies of the current model's figures for the printer columns.
        "model": model,
        "coverage": _percent(current["coverage"]) if current else None,
        "models": models,
        "rollout": _rollout(spec, plan),
        "migration": facts.migration_record,
        "conditions": merge_conditions(old.get("conditions"), list(conditions.values()), now, generation),
    }


def failed(old: dict | None, generation: int | None, reason: str, message: str, now: str) -> dict:
    """The status for a spec the operator could not act on: Ready=False says why; the other
    conditions keep what they last said (the children from before are still running)."""
    old = old or {}
    ready = _condition("Ready", False, reason, message)
    return {"observedGeneration": generation, "mode": old.get("mode"),
            "conditions": merge_conditions(old.get("conditions"), [ready], now, generation)}


def transitions(old: dict | None, new: dict) -> list[tuple[str, str, str]]:
    """Events for what changed: (type, reason, message), one per condition whose status or reason
    moved, and one for a change of mode."""
    old = old or {}
    before = {c["type"]: c for c in old.get("conditions") or []}
    events = []
    # The first mode an index gets is not news (it starts degraded while it migrates); changes are.
    if old.get("mode") and new.get("mode") and old["mode"] != new["mode"]:
        events.append(("Warning" if new["mode"] == "degraded" else "Normal", "ModeChanged",
                       f"search mode {old['mode']} -> {new['mode']}"))
    failed_now = (new.get("migration") or {}).get("failedAttempt")
    if failed_now and failed_now != (old.get("migration") or {}).get("failedAttempt"):
        # One per failed attempt, though the condition's reason stays MigrationFailed between them.
        record = new["migration"]
        events.append(("Warning", "MigrationFailed", f"migration of {record.get('database')}: {attempt_failed(record)}"))
    for cond in new.get("conditions") or []:
        prior = before.get(cond["type"])
        if prior and (prior.get("status"), prior.get("reason")) == (cond["status"], cond["reason"]):
            continue
        if (cond["type"], cond["reason"]) == ("MigrationsApplied", "MigrationFailed"):
            continue  # the attempt's own Event above says it
        kind = "Warning" if cond["reason"] in WARNING_REASONS else "Normal"
        events.append((kind, cond["reason"], f"{cond['type']}={cond['status']}: {cond['message']}"))
    return events
