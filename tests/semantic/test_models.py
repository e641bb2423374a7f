"""`backscroll models list` and `backscroll models drop`: a model taken away with its vectors, index,
registration and backfill, while the other models' coverage stays exactly what it was."""

from __future__ import annotations

import pytest

from backscroll import cli
from backscroll.config import get_settings
from backscroll.embeddings import models
from backscroll.embeddings.vectors import index_name
from backscroll.search import maintenance
from tests.semantic.conftest import FAKE_MODEL
from tests.semantic.test_backfill import corpus, register
from tests.semantic.test_coverage import add_vectors, assert_counts_exact, counted
from tests.semantic.test_status import fake_config, status

OTHER = "other-4"


def _two_models(world) -> list[int]:
    made = corpus(world, {"acme": 7, "hotel": 5})
    ids = made["acme"] + made["hotel"]
    register(world, FAKE_MODEL, 8)
    register(world, OTHER, 4)
    add_vectors(world.conn, FAKE_MODEL, ids[:9], dims=8)
    add_vectors(world.conn, OTHER, ids[2:], dims=4)
    world.conn.execute("insert into embedding_backfills (model, state, embedded, total) values (%s, 'finished', 10, 12)"
                       " on conflict (model) do update set state = 'finished'", (OTHER,))
    return ids


def _rows(conn, model: str) -> dict:
    return conn.execute(
        "select (select count(*) from message_embeddings where model = %(m)s) as vectors,"
        " (select count(*) from embedding_models where model = %(m)s) as registered,"
        " (select count(*) from embedding_backfills where model = %(m)s) as backfills,"
        " (select count(*) from embedding_coverage_stats where model = %(m)s)"
        " + (select count(*) from embedding_coverage_deltas where model = %(m)s) as counters,"
        " to_regclass(%(index)s) is not null as index", {"m": model, "index": index_name(model)}).fetchone()


def test_drop_takes_everything_of_one_model_and_leaves_the_other_exact(world, fake):
    _two_models(world)
    maintenance.fold(world.conn)  # some counts folded, some still deltas: both must go
    assert _rows(world.conn, OTHER) == {"vectors": 10, "registered": 1, "backfills": 1, "counters": 2, "index": True}
    before = status(world, **fake_config(fake))
    fake_before = counted(world.conn, FAKE_MODEL)
    assert [m["model"] for m in before["models"]] == [FAKE_MODEL, OTHER]

    dropped = models.drop_model(world.url, OTHER, quiet=True, batch=3)  # several batches
    assert (dropped.vectors, dropped.index, dropped.registered, dropped.jobs) == (10, index_name(OTHER), True, 0)
    assert _rows(world.conn, OTHER) == {"vectors": 0, "registered": 0, "backfills": 0, "counters": 0,
                                        "index": False}

    after = status(world, **fake_config(fake))
    assert [m["model"] for m in after["models"]] == [FAKE_MODEL]
    assert after["models"] == before["models"][:1]
    assert (after["mode"], after["degradation"]) == (before["mode"], before["degradation"])
    assert counted(world.conn, FAKE_MODEL) == fake_before
    assert_counts_exact(world.conn, FAKE_MODEL, OTHER)
    assert _rows(world.conn, FAKE_MODEL)["index"] is True

    # Registered again under the name, it starts from what it then embeds.
    register(world, OTHER, 4)
    assert counted(world.conn, OTHER) == {a: (0, total) for a, (_, total) in fake_before.items()}
    assert_counts_exact(world.conn, OTHER)


def test_dropping_the_last_model_empties_the_outbox(world):
    made = corpus(world, {"acme": 3})
    register(world, OTHER, 4)
    c = world.conversation("acme", "concierge", "new")
    world.message("acme", c, "written while the model was registered")
    assert world.conn.execute("select count(*) as n from embedding_outbox").fetchone()["n"] == 1
    add_vectors(world.conn, OTHER, made["acme"], dims=4)
    dropped = models.drop_model(world.url, OTHER, quiet=True)
    assert (dropped.vectors, dropped.jobs) == (3, 1)
    assert world.conn.execute("select count(*) as n from embedding_outbox").fetchone()["n"] == 0
    with pytest.raises(models.BackscrollError, match="not registered"):
        models.drop_model(world.url, OTHER, quiet=True)


def test_drop_is_refused_while_its_backfill_runs(world):
    from backscroll.embeddings import backfill
    from backscroll.store.db import connect

    register(world, OTHER, 4)
    with connect(world.url, autocommit=True) as other:
        assert other.execute(backfill.TRY_LOCK, {"class": backfill.LOCK_CLASS, "model": OTHER}).fetchone()["locked"]
        with pytest.raises(backfill.BackfillRunning):
            models.drop_model(world.url, OTHER, quiet=True)
    assert _rows(world.conn, OTHER)["registered"] == 1


@pytest.fixture
def cli_db(world, monkeypatch, tmp_path):
    monkeypatch.setenv("BACKSCROLL_DATABASE_URL", world.url)
    monkeypatch.chdir(tmp_path)
    get_settings.cache_clear()
    yield world
    get_settings.cache_clear()


def test_cli_lists_and_drops_but_not_the_configured_model_without_force(cli_db, capsys, monkeypatch):
    world = cli_db
    _two_models(world)
    assert cli.main(["models", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [[FAKE_MODEL, "8"], [OTHER, "4"]]
    assert "9 of 12" in lines[0] and "75.00%" in lines[0] and "10 of 12" in lines[1]

    monkeypatch.setenv("BACKSCROLL_EMBEDDINGS_MODEL", OTHER)
    get_settings.cache_clear()
    assert cli.main(["models", "drop", OTHER, "--yes"]) == 1
    assert "the configured one" in capsys.readouterr().err
    assert _rows(world.conn, OTHER)["vectors"] == 10
    # Not at a terminal, without --yes: nothing is dropped.
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert cli.main(["models", "drop", OTHER, "--force"]) == 1
    assert "pass --yes" in capsys.readouterr().err
    assert _rows(world.conn, OTHER)["vectors"] == 10

    assert cli.main(["models", "drop", OTHER, "--force", "--yes"]) == 0
    out, err = capsys.readouterr()
    assert f"dropped model {OTHER}: 10 vectors" in out
    assert "drop other-4" in err  # the progress bar, on stderr
    assert cli.main(["models", "list"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == [FAKE_MODEL]
