"""The embedding outbox is written by the database: exactly the indexable messages get one job,
only while a model is registered (off means off), and deleting a message takes its search
document, its vectors and its job with it."""

from __future__ import annotations

import pytest

from backscroll import ingest
from backscroll.embeddings import vectors
from backscroll.embeddings.gateway import GatewayError
from backscroll.embeddings.worker import Worker
from tests.semantic.conftest import fake_settings, settings_for

WS = "acme"


def jobs(w) -> dict[int, dict]:
    return {r["message_id"]: r for r in w.conn.execute("select * from embedding_outbox")}


def embedded(w) -> set[tuple[int, str]]:
    return {(r["message_id"], r["model"]) for r in w.conn.execute("select message_id, model from message_embeddings")}


def documents(w) -> set[int]:
    return {r["message_id"] for r in w.conn.execute("select message_id from message_search")}


def test_off_means_off_nothing_is_queued_or_attempted(db_url, world, fake):
    c = world.conversation(WS, "concierge", "t1")
    world.message(WS, c, "The Rose Room is booked for Friday")
    world.message(WS, c, "Noted", role="assistant")
    assert jobs(world) == {}
    # The worker does not even start without a model, and no request reaches the server.
    with pytest.raises(GatewayError) as info:
        Worker(settings_for(db_url, embeddings={"embeddings_url": fake.url}), db_url)
    assert info.value.category == "not_configured"
    assert fake.requests == []
    assert world.conn.execute("select count(*) as n from embedding_usage").fetchone()["n"] == 0


def test_worker_and_backfill_commands_do_nothing_when_off(db_url, world, monkeypatch, tmp_path, capsys):
    from backscroll.cli import main
    from backscroll.config import get_settings

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BACKSCROLL_DATABASE_URL", db_url)
    monkeypatch.delenv("BACKSCROLL_EMBEDDINGS_MODEL", raising=False)
    get_settings.cache_clear()
    try:
        assert main(["worker", "--once"]) == 0
        assert "embeddings are off" in capsys.readouterr().err
        with pytest.raises(SystemExit) as info:
            main(["backfill"])
        assert "embeddings are off" in str(info.value)
    finally:
        get_settings.cache_clear()


def test_only_finished_user_and_assistant_messages_with_words_get_one_job(world, fake_model):
    c = world.conversation(WS, "concierge", "t1")
    wanted = {world.message(WS, c, "user words"), world.message(WS, c, "assistant words", role="assistant")}
    for role in ("tool", "summary", "system"):
        world.message(WS, c, f"{role} words", role=role)
    streaming = world.message(WS, c, "half a rep", role="assistant", state="streaming")
    blank = world.message(WS, c, "   ")
    assert set(jobs(world)) == wanted
    assert blank in documents(world)  # searchable as a document, but nothing to embed

    # Finishing the streaming reply is what queues it, once.
    with world.conn.transaction():
        ingest.patch_message(world.conn, world.workspace(WS), streaming,
                             ingest.MessagePatch(append="ly", state="finished"))
    assert set(jobs(world)) == wanted | {streaming}
    assert all(j["attempts"] == 0 and j["parked_at"] is None for j in jobs(world).values())


def test_replaying_a_finished_message_queues_nothing_new(world, fake_model):
    c = world.conversation(WS, "concierge", "t1")
    m = world.message(WS, c, "final words", external_id="m1")
    assert set(jobs(world)) == {m}
    world.conn.execute("delete from embedding_outbox")  # as the worker does once it is embedded
    assert world.message(WS, c, "final words", external_id="m1") == m  # a replay: a no-op
    assert jobs(world) == {}


def test_changed_text_drops_stale_vectors_and_queues_again(world, fake_model):
    c = world.conversation(WS, "concierge", "t1")
    m = world.message(WS, c, "dinner in the Rose Room")
    world.conn.execute("insert into message_embeddings (message_id, model, embedding) "
                       "values (%s, %s, '[1,0,0,0,0,0,0,0]')", (m, fake_model))
    world.conn.execute("update embedding_outbox set attempts = 3, last_error = 'x' where message_id = %s", (m,))
    # No API path rewrites a finished message; a person with SQL can, and the vectors must follow.
    world.conn.execute("update messages set body = 'dinner in the Blue Room' where id = %s", (m,))
    assert embedded(world) == set()
    job = jobs(world)[m]
    assert (job["attempts"], job["last_error"]) == (0, None)


def test_a_message_that_stops_being_indexable_loses_its_job_and_vectors(world, fake_model):
    c = world.conversation(WS, "concierge", "t1")
    m = world.message(WS, c, "a user message")
    world.conn.execute("insert into message_embeddings (message_id, model, embedding) "
                       "values (%s, %s, '[1,0,0,0,0,0,0,0]')", (m, fake_model))
    world.conn.execute("update messages set role = 'tool' where id = %s", (m,))
    assert (documents(world), jobs(world), embedded(world)) == (set(), {}, set())


@pytest.mark.parametrize("what", ["message", "conversation"])
def test_deletion_removes_document_vectors_and_job_at_once(world, fake_model, what):
    c = world.conversation(WS, "concierge", "t1")
    keep_c = world.conversation(WS, "concierge", "t2")
    gone = [world.message(WS, c, "first"), world.message(WS, c, "second", role="assistant")]
    kept = world.message(WS, keep_c, "stays")
    vectors.register_model(world.url, "other-4", 4)  # vectors of two models
    for m in gone + [kept]:
        world.conn.execute("insert into message_embeddings (message_id, model, embedding) values "
                           "(%s, %s, '[1,0,0,0,0,0,0,0]'), (%s, 'other-4', '[0,1,0,0]')", (m, fake_model, m))
    assert set(jobs(world)) == set(gone) | {kept}
    with world.conn.transaction():
        if what == "message":
            for m in gone:
                ingest.delete_message(world.conn, world.workspace(WS), m)
        else:
            ingest.delete_conversation(world.conn, world.workspace(WS), c)
    assert documents(world) == {kept}
    assert set(jobs(world)) == {kept}
    assert embedded(world) == {(kept, fake_model), (kept, "other-4")}


def test_deleting_a_message_the_worker_has_claimed_waits_for_the_batch(db_url, world, fake, fake_model,
                                                                       gateway_factory):
    """The worker holds a key-share lock on the messages it embeds: a delete waits for its batch
    and then removes the new vectors too, instead of the two deadlocking."""
    import threading

    c = world.conversation(WS, "concierge", "t1")
    m = world.message(WS, c, "to be deleted while embedding")
    settings = fake_settings(db_url, fake)
    fake.hold = threading.Event()
    with Worker(settings, db_url, gateway=gateway_factory(settings)) as worker:
        t = threading.Thread(target=worker.run_batch)
        t.start()
        assert fake.arrived.wait(5)
        deleter = threading.Thread(target=lambda: ingest.delete_message(world.conn, world.workspace(WS), m))
        deleter.start()
        deleter.join(0.3)
        assert deleter.is_alive()  # waiting for the batch
        fake.hold.set()
        t.join(5)
        deleter.join(5)
    assert not deleter.is_alive()
    assert (documents(world), jobs(world), embedded(world)) == (set(), {}, set())


def _embed_all(w, model: str) -> None:
    """Every indexable message gets a vector and loses its job, as a drained worker leaves them."""
    w.conn.execute("insert into message_embeddings (message_id, model, embedding) "
                   "select message_id, %s, '[1,0,0,0,0,0,0,0]' from embedding_outbox", (model,))
    w.conn.execute("delete from embedding_outbox")


def _vectors(w) -> list[tuple[int, str, str]]:
    return [(r["message_id"], r["model"], str(r["embedded_at"])) for r in w.conn.execute(
        "select message_id, model, embedded_at from message_embeddings order by message_id, model")]


def test_a_language_switch_rebuilds_documents_and_leaves_every_vector_in_place(world, fake_model):
    """Issue 18: switching a workspace's text search configuration rewrites every document and no
    text; it used to delete every vector of the workspace and queue them all again."""
    from backscroll.search import maintenance

    c = world.conversation(WS, "concierge", "t1")
    ids = [world.message(WS, c, f"researching the venues, round {i}", speaker="U_A") for i in range(5)]
    ids.append(world.message(WS, c, "the assistant answers", role="assistant"))
    _embed_all(world, fake_model)
    before = _vectors(world)
    assert [v[0] for v in before] == ids
    tsv_before = {r["message_id"]: r["tsv"] for r in world.conn.execute("select message_id, tsv::text from message_search")}

    maintenance.request_reindex(world.conn, WS, "english")
    maintenance.reindex(world.conn, 2)
    tsv_after = {r["message_id"]: r["tsv"] for r in world.conn.execute("select message_id, tsv::text from message_search")}
    assert tsv_after != tsv_before  # the documents were rebuilt ("research" is a stem now)
    assert _vectors(world) == before  # same count, same ids, not even rewritten
    assert jobs(world) == {}


def test_taking_names_out_of_documents_embeds_again_only_the_messages_with_a_speaker(world, fake_model):
    from backscroll.search import maintenance

    c = world.conversation(WS, "concierge", "t1")
    spoken = world.message(WS, c, "the invoice is wrong", speaker="U_A")
    unspoken = world.message(WS, c, "I will check it", role="assistant")
    _embed_all(world, fake_model)
    maintenance.request_reindex(world.conn, WS, None, speaker_names=False)
    maintenance.reindex(world.conn, 10)
    assert [v[0] for v in _vectors(world)] == [unspoken]
    assert set(jobs(world)) == {spoken}


def test_renaming_a_person_embeds_again_their_messages_and_no_one_elses(world, fake_model):
    c = world.conversation(WS, "concierge", "t1")
    renamed = world.message(WS, c, "the drain is blocked", speaker="U_A")
    other = world.message(WS, c, "since Monday", speaker="U_B")
    _embed_all(world, fake_model)
    world.conn.execute("update actors set display_name = 'Ada Lovelace' where external_id = 'U_A'")
    assert [v[0] for v in _vectors(world)] == [other]
    assert set(jobs(world)) == {renamed}


def test_detecting_a_language_later_rewrites_documents_and_leaves_every_vector_in_place(world, fake_model):
    """Messages from before migration 0022 have no language: detecting it adds the stems to their
    documents (a rewrite of each) and must not cost a single embedding call."""
    from backscroll.config import LanguageSettings
    from backscroll.search import maintenance

    c = world.conversation(WS, "concierge", "t1")
    ids = [world.message(WS, c, f"our researchers presented their findings, round {i}", speaker="U_A")
           for i in range(4)]
    world.conn.execute("update messages set language = null")
    _embed_all(world, fake_model)
    before = _vectors(world)
    assert [v[0] for v in before] == ids
    tsv_before = {r["message_id"]: r["tsv"] for r in world.conn.execute("select message_id, tsv::text from message_search")}
    assert maintenance.fill_languages(world.conn, 3, LanguageSettings()) == 4
    tsv_after = {r["message_id"]: r["tsv"] for r in world.conn.execute("select message_id, tsv::text from message_search")}
    assert all("'research':" in tsv_after[i] and "'research':" not in tsv_before[i] for i in ids)
    assert _vectors(world) == before
    assert jobs(world) == {}
