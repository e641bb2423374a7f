"""Ingestion models refuse what PostgreSQL cannot store, before any SQL runs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from backscroll import ingest


@pytest.mark.parametrize("body", ["a\x00b", "\ud800", "ok \udfff", "\ud83d"])
def test_message_body_must_be_storable(body):
    with pytest.raises(ValidationError) as info:
        ingest.MessageIn(role="user", body=body)
    assert info.value.errors()[0]["loc"] == ("body",)


def test_a_proper_surrogate_pair_is_fine():
    assert ingest.MessageIn(role="user", body="rose \U0001F339").body == "rose 🌹"


def test_speaker_and_audience_text_must_be_storable():
    with pytest.raises(ValidationError):
        ingest.ActorRef(external_id="U\ud800")
    with pytest.raises(ValidationError):
        ingest.Audience(kind="members", readers=["alice", "b\x00b"])


def test_timestamps_must_not_be_far_in_the_future():
    soon = datetime.now(timezone.utc) + timedelta(minutes=30)
    assert ingest.MessageIn(role="user", created_at=soon).created_at == soon
    with pytest.raises(ValidationError):
        ingest.MessageIn(role="user", created_at=datetime.now(timezone.utc) + timedelta(hours=2))
    with pytest.raises(ValidationError):
        ingest.MessageIn(role="user", created_at=datetime(2026, 1, 1))  # naive


def test_import_line_refuses_unknown_fields_and_bad_audiences():
    base = {"agent": "support", "connector": {"type": "slack", "name": "acme"}, "external_id": "c1",
            "creator": {"external_id": "U42"}}
    assert ingest.ImportLine.model_validate(base).agent == "support"
    with pytest.raises(ValidationError):
        ingest.ImportLine.model_validate({**base, "colour": "red"})
    with pytest.raises(ValidationError):
        ingest.ImportLine.model_validate({**base, "creator": None})  # nobody could read it
    with pytest.raises(ValidationError):
        ingest.ImportLine.model_validate({**base, "audience": {"kind": "members"}})
    with pytest.raises(ValidationError):
        ingest.ImportLine.model_validate({**base, "audience": {"kind": "public", "readers": ["x"]}})
