"""What `GET /v1/status` reports: the schema version, the search mode and, per model, coverage.

mode:
- `lexical`  — no model configured (BACKSCROLL_EMBEDDINGS_MODEL unset): semantic search is off.
- `hybrid`   — a model is configured and registered, its endpoint answers, and every indexable
               message has a vector of it.
- `degraded` — a model is configured but search cannot use it fully; `degradation.category`
               says why: `not_configured` (no URL), `not_registered` (run `migrate --model`),
               `unavailable` or `timeout` (the endpoint), `backfilling` (coverage below 1:
               hybrid over what is embedded, lexical over the rest).
"""

from __future__ import annotations

from datetime import datetime

import psycopg

from .config import Settings
from .embeddings.backfill import lock_held
from .embeddings.gateway import Gateway, gateway_for
from .embeddings.vectors import coverage
from .store.migrate import schema_version

TOTAL = "select count(*) as n from message_search where tsv <> ''::tsvector"
MODELS = """
select r.model, r.dimensions, r.created_at,
       (select count(*) from message_embeddings e where e.model = r.model) as embedded,
       b.state as backfill_state, b.started_at, b.updated_at, b.finished_at,
       b.embedded as backfill_embedded, b.total as backfill_total, b.failed as backfill_failed, b.last_error
  from embedding_models r
  left join embedding_backfills b on b.model = r.model
 order by r.created_at, r.model
"""
OUTBOX = """
select count(*) filter (where parked_at is null) as pending,
       count(*) filter (where parked_at is not null) as parked
  from embedding_outbox
"""


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def read(conn: psycopg.Connection, settings: Settings) -> dict:
    """Everything the report needs from the database (one transaction, no network)."""
    total = conn.execute(TOTAL).fetchone()["n"]
    models = []
    for r in conn.execute(MODELS).fetchall():
        backfill = None
        if r["backfill_state"] is not None:
            state = r["backfill_state"]
            if state == "running" and not lock_held(conn, r["model"]):
                state = "interrupted"  # killed: nothing holds its lock any more
            backfill = {
                "state": state, "started_at": _iso(r["started_at"]), "updated_at": _iso(r["updated_at"]),
                "finished_at": _iso(r["finished_at"]), "embedded": r["backfill_embedded"],
                "total": r["backfill_total"], "failed": r["backfill_failed"], "last_error": r["last_error"],
            }
        models.append({
            "model": r["model"], "dimensions": r["dimensions"],
            "current": r["model"] == settings.embeddings.embeddings_model,
            "embedded": r["embedded"], "total": total, "coverage": coverage(r["embedded"], total),
            "backfill": backfill or {"state": "not_started"},
        })
    return {"schema_version": schema_version(conn), "total": total, "models": models,
            "outbox": conn.execute(OUTBOX).fetchone()}


def report(facts: dict, settings: Settings, gateway: Gateway | None = None) -> dict:
    """The status document. Probes the endpoint (outside any transaction) when a model is configured."""
    body = {"schema_version": facts["schema_version"], "mode": "lexical", "degradation": None,
            "embeddings": None, "outbox": facts["outbox"], "models": facts["models"]}
    if not settings.embeddings.enabled:
        return body
    gateway = gateway or gateway_for(settings.embeddings)
    current = next((m for m in facts["models"] if m["current"]), None)
    endpoint = gateway.probe()
    configured = settings.embeddings
    body["embeddings"] = {"model": configured.embeddings_model,
                          "dimensions": current["dimensions"] if current else configured.embeddings_dimensions,
                          "endpoint": endpoint or "ok", "circuit": gateway.breaker.state}
    if current is None:
        degradation = {"category": "not_registered",
                       "detail": f"run `backscroll migrate --model {configured.embeddings_model} --dimensions D`"}
    elif endpoint is not None:
        degradation = {"category": endpoint, "detail": "the embeddings endpoint does not answer; search is lexical"}
    elif current["coverage"] < 1.0:
        degradation = {"category": "backfilling", "coverage": current["coverage"],
                       "detail": "hybrid over embedded messages, lexical over the rest"}
    else:
        body["mode"] = "hybrid"
        return body
    body["mode"], body["degradation"] = "degraded", degradation
    return body
