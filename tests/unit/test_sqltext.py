"""The SQL composer: a statement is stitched from named fragments, or not built at all."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from psycopg import sql

import backscroll
from backscroll.search.sqltext import LOOKS_LIKE_PLACEHOLDER, CompositionError, compose


def test_a_composition_fills_each_placeholder_and_leaves_parameters_and_fields_alone():
    template = "select {distance} as d\n  from <<SOURCE>> x\n where <<PREDICATE>> and x.id = %(id)s and <<PREDICATE>>"
    composed = compose(template, SOURCE="message_search", PREDICATE="x.agent_id = any(%(agents)s::bigint[])")
    assert composed == ("select {distance} as d\n  from message_search x\n"
                        " where x.agent_id = any(%(agents)s::bigint[]) and x.id = %(id)s"
                        " and x.agent_id = any(%(agents)s::bigint[])")
    # Still a template for psycopg's own composition at execution time.
    assert sql.SQL(composed).format(distance=sql.Literal(1)).as_string(None).startswith("select 1 as d")


def test_a_template_without_placeholders_composes_to_itself():
    assert compose("select 1 where a << b") == "select 1 where a << b"


def test_a_placeholder_without_a_fragment_is_refused():
    with pytest.raises(CompositionError, match=r"no fragment for <<TSQUERY>>"):
        compose("select 1 where s.tsv @@ <<TSQUERY>>")


def test_a_misspelt_placeholder_is_refused_not_left_in_the_statement():
    with pytest.raises(CompositionError, match=r"no fragment for <<TSQUREY>>"):
        compose("select 1 where s.tsv @@ <<TSQUREY>>", TSQUERY="websearch_to_tsquery(%(q)s)")


def test_a_fragment_the_template_does_not_use_is_refused():
    with pytest.raises(CompositionError, match=r"does not use: BM25_SCORES"):
        compose("select <<COLUMNS>> from t", COLUMNS="a, b", BM25_SCORES="select 1")


@pytest.mark.parametrize("written", ["<<tsquery>>", "<< TSQUERY >>", "<<Tsquery>>", "<<_TSQUERY>>"])
def test_something_that_looks_like_a_placeholder_is_refused(written):
    with pytest.raises(CompositionError, match="not a placeholder"):
        compose(f"select 1 where s.tsv @@ {written}", TSQUERY="q")


def test_a_placeholder_left_by_a_fragment_is_refused():
    # Fragments go in as they are, in one pass: a fragment that takes fragments is composed first.
    with pytest.raises(CompositionError, match=r"left after composing.*<<SOURCE>>"):
        compose("with bm25 as (<<BM25_SCORES>>) select 1", BM25_SCORES="select * from <<SOURCE>> x")
    inner = compose("select * from <<SOURCE>> x", SOURCE="matches")
    assert compose("with bm25 as (<<BM25_SCORES>>) select 1", BM25_SCORES=inner) == \
        "with bm25 as (select * from matches x) select 1"


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple, frozenset, set)):
        for v in value:
            yield from _strings(v)


def test_every_module_level_statement_is_composed():
    """No string held at module level anywhere in the package keeps a placeholder: every
    template was composed when its module was imported, so no statement can run with one."""
    seen = 0
    left = []
    for info in pkgutil.walk_packages(backscroll.__path__, "backscroll."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if name.startswith("__"):
                continue
            for text in _strings(value):
                seen += 1
                if LOOKS_LIKE_PLACEHOLDER.search(text):
                    left.append(f"{info.name}.{name}")
    assert not left, f"placeholders left in {left}"
    # The sweep reached the composed statements (it is not vacuous).
    from backscroll.search import history_sql, ranking, sessions_sql
    assert seen > 100
    assert "backscroll_or_query" in sessions_sql.SEARCH and "from content_candidates x" in sessions_sql.SEARCH
    assert "from matches x" in history_sql.SEARCH and "backscroll_sealed_allows" in history_sql.VECTOR_SHAPES["hnsw"]
    assert "search_doc_stats" in ranking.QUERY_STATS["agents"]


def test_the_statements_built_at_call_time_are_composed():
    from backscroll.search import hybrid, ranking, sessions_sql
    for text in (ranking.bm25_scores("matches"), sessions_sql._exact_scan(sessions_sql.SEMANTIC_OWN_ARM),
                 hybrid.rrf_sql("l.rank", "v.rank")):
        assert not LOOKS_LIKE_PLACEHOLDER.search(text)
