"""The one reciprocal-rank-fusion formula (hybrid.rrf_sql), as PostgreSQL computes it in both
searches' statements: the sum over the lists of weight / (k + rank), a list without the row
adding nothing, the lexical list weighted by `hybrid_lexical_weight`."""

from __future__ import annotations

import pytest

from backscroll.search import history_sql, hybrid, sessions_sql


@pytest.mark.parametrize("weight", [1.0, 2.0])
def test_rrf_sums_reciprocal_ranks_with_k_60(world, weight):
    rows = world.conn.execute(
        f"select {hybrid.rrf_sql('x.a', 'x.b')} as score"
        " from (values (1, null::int, 1), (1, 3, 2), (null::int, null::int, 3), (60, 60, 4), (null, 1, 5)) as x(a, b, i)"
        " order by x.i", {"rrf_k": hybrid.RRF_K, "rrf_lexical_weight": weight}).fetchall()
    assert [float(r["score"]) for r in rows] == pytest.approx(
        [weight / 61, weight / 61 + 1 / 63, 0, (weight + 1) / 120, 1 / 61])


def test_both_searches_fuse_with_that_formula():
    assert hybrid.rrf_sql("b.rank", "v.rank") in sessions_sql.SEARCH_FUSION
    assert hybrid.rrf_sql("l.lexical_rank_all", "w.vector_pos") in history_sql.SEARCH_RANKING
    assert hybrid.rrf_sql("f.lexical_rank", "f.vector_rank") in history_sql.SEARCH_RANKING
    for statement in (sessions_sql.SEARCH, sessions_sql.SEARCH_LISTED, history_sql.SEARCH, history_sql.SEARCH_LISTED):
        # every reciprocal rank in them is one of the formula's
        assert statement.count("/ (%(rrf_k)s + ") == 2 * statement.count("%(rrf_lexical_weight)s::float8 / (%(rrf_k)s + ")
