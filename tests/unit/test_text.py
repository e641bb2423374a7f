"""Pure text helpers of session search: LIKE escaping, excerpt parsing, query validation."""

from __future__ import annotations

import re

import pytest

from backscroll.errors import BadRequest
from backscroll.search.limits import clamp_limit
from backscroll.search.sessions import HL_START, HL_STOP, Limits, escape_like, parse_excerpt, validate_query

LIMITS = Limits(default=20, maximum=100, query_max_chars=32, excerpt_words=24)


def like(pattern: str, text: str) -> bool:
    """LIKE semantics with backslash as the escape character, as PostgreSQL applies them."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.fullmatch("".join(out), text, re.S) is not None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("rose", "rose"),
        ("100%", "100\\%"),
        ("a_b", "a\\_b"),
        ("back\\slash", "back\\\\slash"),
        ("\\%", "\\\\\\%"),
        ("%_%", "\\%\\_\\%"),
        ("", ""),
    ],
)
def test_escape_like(text, expected):
    assert escape_like(text) == expected


@pytest.mark.parametrize(
    "q, title, matches",
    [
        ("100%", "100% done", True),
        ("100%", "1000 done", False),
        ("a_b", "a_b", True),
        ("a_b", "axb", False),
        ("%", "50/50", False),
        ("%", "50%", True),
        ("_", "x", False),
        ("a\\b", "a\\b", True),
        ("a\\b", "ab", False),
        ("a\\%", "a\\%", True),
        ("a\\%", "a\\x", False),
    ],
)
def test_escaped_text_matches_only_itself(q, title, matches):
    assert like(f"%{escape_like(q)}%", title) is matches


def test_parse_excerpt_spans_point_at_the_marked_words():
    marked = f"We moved the dinner to the {HL_START}Rose{HL_STOP} {HL_START}Room{HL_STOP} on Friday"
    text, spans = parse_excerpt(marked)
    assert text == "We moved the dinner to the Rose Room on Friday"
    assert spans == [[27, 31], [32, 36]]
    assert [text[a:b] for a, b in spans] == ["Rose", "Room"]


def test_parse_excerpt_without_marks():
    assert parse_excerpt("plain text") == ("plain text", [])
    assert parse_excerpt("") == ("", [])


def test_parse_excerpt_counts_characters_not_bytes():
    text, spans = parse_excerpt(f"café ✓ {HL_START}naïve{HL_STOP} 🌹")
    assert text == "café ✓ naïve 🌹"
    assert [text[a:b] for a, b in spans] == ["naïve"]


def test_parse_excerpt_ignores_unbalanced_marks():
    text, spans = parse_excerpt(f"a {HL_STOP}b{HL_START} c")
    assert text == "a b c"
    assert spans == []
    text, spans = parse_excerpt(f"{HL_START}x{HL_START}y{HL_STOP}")
    assert text == "xy"
    assert spans == [[1, 2]]


def test_parse_excerpt_at_both_ends():
    text, spans = parse_excerpt(f"{HL_START}rose{HL_STOP}")
    assert (text, spans) == ("rose", [[0, 4]])


def test_clamp_limit():
    assert clamp_limit(None, LIMITS.default, LIMITS.maximum) == 20
    assert clamp_limit(0, LIMITS.default, LIMITS.maximum) == 1
    assert clamp_limit(-5, LIMITS.default, LIMITS.maximum) == 1
    assert clamp_limit(7, LIMITS.default, LIMITS.maximum) == 7
    assert clamp_limit(100, LIMITS.default, LIMITS.maximum) == 100
    assert clamp_limit(10_000, LIMITS.default, LIMITS.maximum) == 100


def test_validate_query():
    assert validate_query(None, LIMITS) is None
    assert validate_query("   ", LIMITS) is None
    assert validate_query("  rose  ", LIMITS) == "rose"
    assert validate_query("x" * 32, LIMITS) == "x" * 32
    with pytest.raises(BadRequest) as info:
        validate_query("x" * 33, LIMITS)
    assert info.value.code == "query_too_long"
    with pytest.raises(BadRequest) as info:
        validate_query("ro\x00se", LIMITS)
    assert info.value.code == "invalid_query"
