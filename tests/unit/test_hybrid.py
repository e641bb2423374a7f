"""Reciprocal rank fusion, as both searches use it."""

from __future__ import annotations

import pytest

from backscroll import hybrid


def test_rrf_sums_reciprocal_ranks_with_k_60():
    assert hybrid.rrf(1, None) == pytest.approx(1 / 61)
    assert hybrid.rrf(1, 3) == pytest.approx(1 / 61 + 1 / 63)
    assert hybrid.rrf(None, None) == 0


def test_fuse_puts_items_in_both_lists_first_and_is_deterministic():
    fused = hybrid.fuse(["a", "b", "c"], ["c", "d"])
    assert [f.key for f in fused] == ["c", "a", "b", "d"]  # b and d tie: first seen first
    assert fused[0].ranks == (3, 1) and fused[1].ranks == (1, None) and fused[3].ranks == (None, 2)
    # Equal scores keep first-seen order.
    assert [f.key for f in hybrid.fuse(["x"], ["y"])] == ["x", "y"]


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
