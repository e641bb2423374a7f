"""The one reciprocal-rank-fusion formula (hybrid.rrf_sql), as PostgreSQL computes it in both
searches' statements: the sum over the lists of 1 / (k + rank), a list without the row adding
nothing."""

from __future__ import annotations

import pytest

from backscroll.search import history_sql, hybrid, sessions_sql


def test_rrf_sums_reciprocal_ranks_with_k_60(world):
    rows = world.conn.execute(
        f"select {hybrid.rrf_sql('x.a', 'x.b')} as score"
        " from (values (1, null::int, 1), (1, 3, 2), (null::int, null::int, 3), (60, 60, 4)) as x(a, b, i)"
        " order by x.i", {"rrf_k": hybrid.RRF_K}).fetchall()
    assert [float(r["score"]) for r in rows] == pytest.approx([1 / 61, 1 / 61 + 1 / 63, 0, 2 / 120])


def test_both_searches_fuse_with_that_formula():
    assert hybrid.rrf_sql("b.rank", "v.rank") in sessions_sql.SEARCH_FUSION
    assert hybrid.rrf_sql("l.lexical_rank_all", "w.vector_pos") in history_sql.SEARCH_RANKING
    assert hybrid.rrf_sql("f.lexical_rank", "f.vector_rank") in history_sql.SEARCH_RANKING
    for statement in (sessions_sql.SEARCH, sessions_sql.SEARCH_LISTED, history_sql.SEARCH, history_sql.SEARCH_LISTED):
        assert statement.count("1.0 / (%(rrf_k)s + ") == statement.count(hybrid.rrf_sql("x").split(" + x")[0])
