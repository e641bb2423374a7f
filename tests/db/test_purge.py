"""`backscroll purge --yes-delete-all-data`: every object the migrations made is gone, the
extensions and other applications' objects stay, and `backscroll migrate` starts again from nothing."""

from __future__ import annotations

from backscroll import cli
from backscroll.embeddings.vectors import index_name, register_model
from backscroll.store.db import connect
from backscroll.store.migrate import load_definitions, load_migrations, schema_version
from backscroll.store.purge import created_names
from tests.world import open_world

# Everything in the current schema that is not an extension's: what the migrations made, and
# what this test adds for another application.
OBJECTS = """
select 'rel:' || c.relname as o from pg_class c
 where c.relnamespace = current_schema()::regnamespace
   and not exists (select 1 from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'e')
union all
select 'fn:' || p.proname from pg_proc p
 where p.pronamespace = current_schema()::regnamespace
   and not exists (select 1 from pg_depend d where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e')
union all
select 'type:' || t.typname from pg_type t
 where t.typnamespace = current_schema()::regnamespace and t.typrelid = 0 and t.typelem = 0
   and not exists (select 1 from pg_depend d where d.classid = 'pg_type'::regclass and d.objid = t.oid and d.deptype = 'e')
union all
select 'cfg:' || c.cfgname from pg_ts_config c where c.cfgnamespace = current_schema()::regnamespace
"""
EXTENSIONS = "select extname from pg_extension where extname <> 'plpgsql' order by 1"


def _objects(conn) -> set[str]:
    return {r["o"] for r in conn.execute(OBJECTS)}


def test_purge_drops_what_migrate_made_and_migrate_starts_again(cli_env, capsys):
    w = open_world(cli_env)
    try:
        c = w.conversation("acme", "concierge", "t1", "Rose Room")
        w.message("acme", c, "The Rose Room is booked")
        w.token("admin")
        register_model(cli_env, "fake-8", 8)  # an HNSW index outside any migration file
        w.conn.execute("create table other_app_notes (id int)")
        extensions = w.conn.execute(EXTENSIONS).fetchall()
        assert [e["extname"] for e in extensions] == ["btree_gin", "pg_trgm", "vector"]
        made = _objects(w.conn)
    finally:
        w.conn.close()
    names = created_names()
    assert {"rel:messages", "rel:backscroll_migrations", "type:token_kind", "cfg:multilingual",
            "fn:backscroll_fold_search_stats", f"rel:{index_name('fake-8')}"} <= made
    assert {"messages", "backscroll_migrations"} <= names["table"] and "multilingual" in names["configuration"]

    assert cli.main(["purge"]) == 2  # refused without the flag: nothing dropped
    assert "--yes-delete-all-data" in capsys.readouterr().err
    with connect(cli_env) as conn:
        assert _objects(conn) == made

    assert cli.main(["purge", "--yes-delete-all-data"]) == 0
    assert f"purged {len(names['table'])} tables" in capsys.readouterr().out
    with connect(cli_env) as conn:
        assert _objects(conn) == {"rel:other_app_notes"}  # another application's table stays
        assert conn.execute(EXTENSIONS).fetchall() == extensions
        assert schema_version(conn) == 0

    assert cli.main(["purge", "--yes-delete-all-data"]) == 0  # nothing left to drop: still fine
    assert "purged 0 tables" in capsys.readouterr().out

    assert cli.main(["migrate"]) == 0
    out = capsys.readouterr().out
    assert out.count("applied ") == len(load_migrations()) + len(load_definitions())
    w = open_world(cli_env)
    try:
        assert schema_version(w.conn) == load_migrations()[-1].version
        assert w.conn.execute("select count(*) as n from messages").fetchone()["n"] == 0
        c = w.conversation("acme", "concierge", "t1", "Rose Room")  # works as on a new database
        assert w.message("acme", c, "The Rose Room is booked again")
        assert _objects(w.conn) == made - {f"rel:{index_name('fake-8')}"}
    finally:
        w.conn.close()
