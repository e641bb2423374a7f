"""Query vectors and how a search degrades (the fusion itself is SQL: tests/db/test_rrf.py)."""

from __future__ import annotations

import pytest

from backscroll.search import hybrid


def test_a_usable_vector_over_an_incomplete_perspective_reports_backfilling():
    qv = hybrid.QueryVector(hybrid.HYBRID, vector=[1.0], model=object())
    assert hybrid.with_coverage(qv, 10, 10) is qv
    partial = hybrid.with_coverage(qv, 1, 4)
    assert (partial.mode, partial.degradation, partial.usable) == (
        hybrid.DEGRADED, {"category": "backfilling", "coverage": 0.25}, True)
    assert hybrid.category(partial) == "backfilling" and hybrid.category(qv) is None


def test_no_model_or_no_url_is_lexical_without_a_call():
    from backscroll.config import Settings

    assert hybrid.embed_query(None, Settings.declared().embeddings, 1, "q") == hybrid.QueryVector(hybrid.LEXICAL)
    assert hybrid.embed_query(None, Settings(_env_file=None).embeddings, 1, "q").mode == hybrid.LEXICAL
    no_url = Settings(_env_file=None).replace(embeddings={"embeddings_model": "m"}).embeddings
    assert hybrid.embed_query(None, no_url, 1, "q") == hybrid.QueryVector(hybrid.LEXICAL)


def test_a_fused_lexical_match_holds_a_share_of_the_query_and_never_less_than_its_median_word():
    from backscroll.search.ranking import match_floor

    # Four content words, two common: 0.25 of their idf (2.0) is above the (lower) median word's 0.5.
    weights = [0.5, 3.0, 4.0, 0.5]
    assert match_floor(weights, 0.25) == pytest.approx(2.0)
    assert match_floor([1.0, 3.0, 4.0], 0.25) == pytest.approx(3.0)          # the median word alone passes
    assert match_floor([1.0, 3.0, 4.0], 0.9) == pytest.approx(0.9 * 8.0)     # a large share rules
    assert match_floor([0.0, 2.0, 0.0, 6.0], 0.1) == pytest.approx(2.0)      # words no config reads weigh nothing
    assert match_floor(weights, 0.0) == 0.0 and match_floor([], 0.5) == 0.0  # 0: every match is fused
