"""Query vectors and how a search degrades (the fusion itself is SQL: tests/db/test_rrf.py)."""

from __future__ import annotations


from backscroll.search import hybrid


def test_a_usable_vector_over_an_incomplete_perspective_reports_backfilling():
    qv = hybrid.QueryVector(hybrid.HYBRID, vector=[1.0], model=object())
    assert hybrid.with_coverage(qv, 10, 10) is qv
    partial = hybrid.with_coverage(qv, 1, 4)
    assert (partial.mode, partial.degradation, partial.usable) == (
        hybrid.DEGRADED, {"category": "backfilling", "coverage": 0.25}, True)
    assert hybrid.category(partial) == "backfilling" and hybrid.category(qv) is None


def test_no_settings_or_no_model_is_lexical_without_a_call():
    from backscroll.config import Settings

    assert hybrid.embed_query(None, None, 1, "q") == hybrid.QueryVector(hybrid.LEXICAL)
    assert hybrid.embed_query(None, Settings(_env_file=None), 1, "q").mode == hybrid.LEXICAL
    no_url = Settings(_env_file=None, embeddings_model="m")
    assert hybrid.embed_query(None, no_url, 1, "q") == hybrid.QueryVector(hybrid.LEXICAL)
