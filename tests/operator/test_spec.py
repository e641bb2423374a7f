"""Spec parsing: defaults, and errors that name the field."""

from __future__ import annotations

import pytest

from backscroll_operator.spec import SpecError, parse, unknown_fields

BASE = {"image": "backscroll:1", "database": {"secretRef": {"name": "db"}}}


def test_defaults():
    spec = parse({**BASE, "embeddings": {"model": "m", "dimensions": 8}})
    assert spec.database.secret_ref.key == "uri"
    assert spec.api.replicas == 2 and spec.api.service.port == 8080 and spec.worker.replicas == 1
    assert spec.text_search_config == "multilingual"
    assert (spec.ranking.method, spec.ranking.k1, spec.ranking.b, spec.ranking.candidate_pool) == ("bm25", 1.2, 0.3, 500)
    assert spec.embeddings.in_cluster and spec.embeddings.server_or_default().port == 80
    assert spec.embeddings.backfill.batch_size == 32


@pytest.mark.parametrize("spec, field", [
    ({"database": {"secretRef": {"name": "db"}}}, "spec.image"),
    ({"image": "i"}, "spec.database"),
    ({**BASE, "embeddings": {"model": "m", "dimensions": 2001}}, "spec.embeddings.dimensions"),
    ({**BASE, "embeddings": {"model": "m", "dimensions": 0}}, "spec.embeddings.dimensions"),
    ({**BASE, "embeddings": {"dimensions": 8}}, "spec.embeddings.model"),
    ({**BASE, "api": {"replicas": -1}}, "spec.api.replicas"),
    ({**BASE, "textSearchConfig": "english; drop"}, "spec.textSearchConfig"),
    ({**BASE, "ranking": {"method": "tfidf"}}, "spec.ranking.method"),
    ({**BASE, "ranking": {"b": 1.5}}, "spec.ranking.b"),
    ({**BASE, "ranking": {"candidatePool": -1}}, "spec.ranking.candidatePool"),
    ({**BASE, "embeddings": {"model": "m", "dimensions": 8, "external": {"url": "ftp://x"}}},
     "spec.embeddings.external.url"),
])
def test_errors_name_the_field(spec, field):
    with pytest.raises(SpecError) as err:
        parse(spec)
    assert err.value.field == field
    assert str(err.value).startswith(field + ": ")


def test_server_and_external_together_are_refused():
    with pytest.raises(SpecError) as err:
        parse({**BASE, "embeddings": {"model": "m", "dimensions": 8, "server": {},
                                      "external": {"url": "https://x/v1"}}})
    assert err.value.field == "spec.embeddings"
    assert "either server or external" in err.value.message


def test_a_models_dimensions_cannot_change_under_its_name():
    spec = {**BASE, "embeddings": {"model": "m", "dimensions": 256}}
    with pytest.raises(SpecError) as err:
        parse(spec, registered={"m": 384})
    assert err.value.field == "spec.embeddings.dimensions"
    assert "m@256" in err.value.message
    assert parse(spec, registered={"m": 256}).embeddings.dimensions == 256
    assert parse(spec, registered={"other": 384}).embeddings.model == "m"


def test_fields_a_newer_crd_added_are_ignored_and_named():
    """A newer CRD's defaulted fields reach an older operator in every object: it acts on what it
    knows and names the rest (for a log line), where it used to refuse the whole spec."""
    spec = {**BASE, "futureField": "x", "api": {"replicas": 3, "futureField": {"a": 1}},
            "embeddings": {"model": "m", "dimensions": 8, "server": {"replicas": 2, "newKnob": True},
                           "backfill": {"rate": 5, "later": 1}},
            "pod": {"nodeSelector": {"any-key": "is-a-value"}, "tolerations": [{"anything": "goes"}]}}
    parsed = parse(spec)
    assert parsed.api.replicas == 3 and parsed.embeddings.server.replicas == 2
    assert parsed.embeddings.backfill.rate == 5
    assert parse({**BASE, "api": {"replicas": 3}}).api == parsed.api, "an unknown field changes nothing"
    assert unknown_fields(spec) == ["spec.api.futureField", "spec.embeddings.backfill.later",
                                    "spec.embeddings.server.newKnob", "spec.futureField"]
    assert unknown_fields({**BASE, "api": {"targetCPUUtilizationPercentage": 1}}) == ["spec.api.targetCPUUtilizationPercentage"]
    assert unknown_fields({**BASE, "api": {"autoscaling": {"targetCPUUtilizationPercentage": 50}}}) == []
    assert unknown_fields(BASE) == []
