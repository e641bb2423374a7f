"""GET /v1/status: the schema version, the mode (lexical | hybrid | degraded, with a category) and,
per model, dimensions, coverage and the backfill's state."""

from __future__ import annotations

from backscroll.embeddings.backfill import run_backfill
from backscroll.store.migrate import load_migrations
from tests.semantic.conftest import FAKE_MODEL, fake_settings
from tests.semantic.test_backfill import corpus, register
from tests.semantic.test_gateway import _closed_port_url
from tests.world import bearer, client


def status(world, **settings) -> dict:
    admin = world.token("admin")
    with client(world.url, **settings) as http:
        r = http.get("/v1/status", headers=bearer(admin))
    assert r.status_code == 200, r.text
    return r.json()


def fake_config(fake) -> dict:
    return {"embeddings": {"embeddings_model": FAKE_MODEL, "embeddings_url": fake.url, "embeddings_dimensions": 8}}


def test_lexical_when_no_model_is_configured(world):
    corpus(world, {"acme": 2})
    body = status(world)
    assert body["schema_version"] == load_migrations()[-1].version
    assert (body["mode"], body["degradation"], body["embeddings"], body["models"]) == ("lexical", None, None, [])
    assert body["outbox"] == {"pending": 0, "parked": 0}


def test_degraded_until_the_model_is_registered(world, fake):
    body = status(world, **fake_config(fake))
    assert body["mode"] == "degraded" and body["degradation"]["category"] == "not_registered"
    assert "migrate --model fake-8" in body["degradation"]["detail"]


def test_degraded_backfilling_then_hybrid(db_url, world, fake, gateway_factory):
    corpus(world, {"acme": 6, "hotel": 2})
    register(world)
    body = status(world, **fake_config(fake))
    assert body["mode"] == "degraded"
    assert body["degradation"]["category"] == "backfilling" and body["degradation"]["coverage"] == 0.0
    [model] = body["models"]
    backfill = model.pop("backfill")
    assert model == {"model": FAKE_MODEL, "dimensions": 8, "current": True, "embedded": 0, "total": 8,
                     "coverage": 0.0}
    # Registered over existing messages: a backfill is owed until someone runs it.
    assert (backfill["state"], backfill["embedded"], backfill["total"], backfill["finished_at"]) == (
        "pending", 0, 8, None)

    world.conn.execute("insert into message_embeddings (message_id, model, embedding) "
                       "select message_id, %s, l2_normalize(array_fill(0.5, array[8])::vector) from message_search "
                       "order by message_id limit 2", (FAKE_MODEL,))
    body = status(world, **fake_config(fake))
    assert body["degradation"] == {"category": "backfilling", "coverage": 0.25,
                                   "detail": "hybrid over embedded messages, lexical over the rest"}

    settings = fake_settings(db_url, fake)
    run_backfill(settings, db_url, FAKE_MODEL, gateway=gateway_factory(settings), quiet=True)
    body = status(world, **fake_config(fake))
    assert (body["mode"], body["degradation"]) == ("hybrid", None)
    assert body["embeddings"] == {"model": FAKE_MODEL, "dimensions": 8, "endpoint": "ok", "circuit": "closed"}
    [model] = body["models"]
    assert (model["embedded"], model["total"], model["coverage"]) == (8, 8, 1.0)
    assert model["backfill"]["state"] == "finished" and model["backfill"]["embedded"] == 8
    assert model["backfill"]["finished_at"] is not None

    # A new message is hybrid's as soon as the worker has it; until then the outbox says so.
    c = world.conversation("acme", "concierge", "acme-t")
    world.message("acme", c, "a new message")
    body = status(world, **fake_config(fake))
    assert body["mode"] == "degraded" and body["outbox"] == {"pending": 1, "parked": 0}


def test_a_killed_backfill_reads_as_interrupted(world, fake):
    corpus(world, {"acme": 2})
    register(world)
    world.conn.execute("update embedding_backfills set state = 'running', embedded = 1 where model = %s",
                       (FAKE_MODEL,))
    [model] = status(world, **fake_config(fake))["models"]
    assert model["backfill"]["state"] == "interrupted"  # nothing holds the run's lock


def test_degraded_unavailable_when_the_endpoint_does_not_answer(world):
    corpus(world, {"acme": 2})
    register(world)
    body = status(world, embeddings={"embeddings_model": FAKE_MODEL, "embeddings_url": _closed_port_url(),
                                     "embeddings_dimensions": 8})
    assert body["mode"] == "degraded" and body["degradation"]["category"] == "unavailable"
    assert body["embeddings"]["endpoint"] == "unavailable"


def test_status_lists_every_registered_model(world, fake):
    register(world)
    register(world, "next-model", 16)
    body = status(world, **fake_config(fake))
    assert [(m["model"], m["dimensions"], m["current"]) for m in body["models"]] == \
           [(FAKE_MODEL, 8, True), ("next-model", 16, False)]


def test_status_is_for_admins_only(world):
    reader = world.token("reader", "acme", actor="alice")
    with client(world.url) as http:
        assert http.get("/v1/status", headers=bearer(reader)).status_code == 403
        assert http.get("/v1/status").status_code == 401
