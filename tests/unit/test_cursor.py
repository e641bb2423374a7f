"""Opaque page cursors: what encode makes, decode returns; anything else is a 400."""

from __future__ import annotations

import base64
import json

import pytest

from backscroll.search.cursor import MAX_CURSOR_CHARS, CursorCodec, fingerprint
from backscroll.errors import BadRequest

KEY = b"cursor-key-0123456789abcdef012345"


@pytest.fixture
def codec() -> CursorCodec:
    return CursorCodec(KEY)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _refused(codec: CursorCodec, cursor: str, kind: str = "recent", fp: str | None = None) -> BadRequest:
    with pytest.raises(BadRequest) as info:
        codec.decode(cursor, kind, fp if fp is not None else fingerprint("recent", None))
    assert info.value.status == 400
    assert info.value.code == "invalid_cursor"
    return info.value


@pytest.mark.parametrize(
    "position",
    [
        ["2026-01-01T00:00:00.123456+00:00", 42],
        [2, 0.3333333432674408, 9_223_372_036_854_775_807],
        [1, 1e-30, 1],
        ["ünïcödé ✓", None, -1],
    ],
)
def test_round_trip(codec, position):
    fp = fingerprint("search", "rose room", None)
    cursor = codec.encode("search", fp, position)
    assert codec.decode(cursor, "search", fp) == position


def test_cursor_is_url_safe_and_opaque(codec):
    cursor = codec.encode("recent", fingerprint("recent", None), ["2026-01-01T00:00:00+00:00", 7])
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
    assert "2026" not in cursor


def test_tampered_payload_is_refused(codec):
    fp = fingerprint("recent", None)
    cursor = codec.encode("recent", fp, ["2026-01-01T00:00:00+00:00", 7])
    body, tag = cursor.split(".")
    data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    data["p"][1] = 8  # skip ahead, keep the old signature
    forged = f"{_b64(json.dumps(data, separators=(',', ':')).encode())}.{tag}"
    assert forged != cursor
    _refused(codec, forged, fp=fp)


def test_flipped_character_is_refused(codec):
    fp = fingerprint("recent", None)
    cursor = codec.encode("recent", fp, ["2026-01-01T00:00:00+00:00", 7])
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for index in (0, len(cursor) // 3, cursor.index(".") - 2, cursor.index(".") + 1, len(cursor) - 2):
        # Move the character by half the alphabet, so its high bits (never padding bits) change.
        flipped = alphabet[(alphabet.index(cursor[index]) + 32) % 64]
        _refused(codec, cursor[:index] + flipped + cursor[index + 1:], fp=fp)


@pytest.mark.parametrize("cut", [1, 2, 3, 5, 12])
def test_truncated_cursor_is_refused(codec, cut):
    fp = fingerprint("recent", None)
    cursor = codec.encode("recent", fp, ["2026-01-01T00:00:00+00:00", 7])
    _refused(codec, cursor[:-cut], fp=fp)


def test_cursor_without_its_tag_is_refused(codec):
    fp = fingerprint("recent", None)
    cursor = codec.encode("recent", fp, ["2026-01-01T00:00:00+00:00", 7])
    _refused(codec, cursor.split(".")[0], fp=fp)
    _refused(codec, cursor.split(".")[0] + ".", fp=fp)


def test_wrong_key_is_refused(codec):
    fp = fingerprint("recent", None)
    cursor = CursorCodec(b"another installation's key......").encode("recent", fp, ["x", 1])
    _refused(codec, cursor, fp=fp)


@pytest.mark.parametrize(
    "garbage",
    ["", ".", "....", "not a cursor", "abc.def", "%%%.***", "é.é", "\x00.\x00", "eyJ2IjoxfQ.", "a.b.c"],
)
def test_garbage_is_refused(codec, garbage):
    _refused(codec, garbage)


def test_too_long_is_refused_before_anything_else(codec):
    fp = fingerprint("recent", None)
    long_position = ["x" * MAX_CURSOR_CHARS, 1]
    cursor = codec.encode("recent", fp, long_position)  # genuinely signed, but too long
    assert len(cursor) > MAX_CURSOR_CHARS
    err = _refused(codec, cursor, fp=fp)
    assert "pass back" in err.message


def test_cursor_at_the_length_limit_is_accepted(codec):
    fp = fingerprint("recent", None)
    pad = 1
    while len(codec.encode("recent", fp, ["x" * (pad + 1), 1])) <= MAX_CURSOR_CHARS:
        pad += 1
    cursor = codec.encode("recent", fp, ["x" * pad, 1])
    assert len(cursor) <= MAX_CURSOR_CHARS
    assert codec.decode(cursor, "recent", fp) == ["x" * pad, 1]


def test_kind_mismatch_is_refused(codec):
    fp = fingerprint("recent", None)
    cursor = codec.encode("recent", fp, ["2026-01-01T00:00:00+00:00", 7])
    err = _refused(codec, cursor, kind="search", fp=fp)
    assert "different query" in err.message


def test_fingerprint_mismatch_is_refused(codec):
    cursor = codec.encode("search", fingerprint("search", "rose", None), [2, 0.5, 7])
    err = _refused(codec, cursor, kind="search", fp=fingerprint("search", "room", None))
    assert "different query" in err.message
    _refused(codec, cursor, kind="search", fp=fingerprint("search", "rose", 3))


def test_other_version_is_refused(codec):
    fp = fingerprint("recent", None)
    payload = json.dumps({"v": 0, "k": "recent", "f": fp, "p": ["x", 1]}, separators=(",", ":")).encode()
    cursor = f"{_b64(payload)}.{_b64(codec._tag(payload))}"
    err = _refused(codec, cursor, fp=fp)
    assert "version" in err.message


def test_fingerprint_distinguishes_its_parts():
    assert fingerprint("search", "rose", None) == fingerprint("search", "rose", None)
    assert fingerprint("search", "rose", None) != fingerprint("search", "rose ", None)
    assert fingerprint("search", "rose", None) != fingerprint("search", "rose", 1)
    assert fingerprint("search", "a", "b") != fingerprint("search", "a,b")
    assert fingerprint("recent", None) != fingerprint("search", None)


def test_a_keyset_cursor_decodes_to_its_timestamp_and_id_or_is_refused():
    from datetime import datetime, timezone

    codec = CursorCodec(b"k" * 32)
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert codec.decode_keyset(codec.encode("recent", "fp", [at.isoformat(), 7]), "recent", "fp") == (at, 7)
    for position in ([], ["not a time", 7], [at.isoformat(), "x"], [at.isoformat()]):
        with pytest.raises(BadRequest) as caught:
            codec.decode_keyset(codec.encode("recent", "fp", position), "recent", "fp")
        assert caught.value.code == "invalid_cursor"
