"""A query's terms, as both searches read them: quoted phrases stay together, everything else
splits on whitespace, and the terms are OR'd (BM25 then ranks by how many, and how rare, match).

search_history takes an agent's text as it comes. Session search also reads the two operators
a person types into a search box: `-word` (or `-"a phrase"`) excludes the messages that contain
it, and a bare `or` between terms is the default anyway and is dropped. Nothing here reaches SQL
as syntax: each term is handed to `phraseto_tsquery` as text (backscroll_or_query).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_TERMS = 32
MAX_TERM_CHARS = 128

_TOKEN = re.compile(r'(-?)"([^"]*)"?|(\S+)')


def split_terms(query: str) -> list[str]:
    """Quoted phrases stay together; everything else splits on whitespace. Terms are OR'd."""
    terms: list[str] = []
    for quoted, bare in re.findall(r'"([^"]*)"|(\S+)', query):
        term = (quoted or bare).strip().strip('"')
        if term:
            terms.append(term[:MAX_TERM_CHARS])
    return terms[:MAX_TERMS]


@dataclass(frozen=True)
class SearchTerms:
    positive: list[str]   # words and phrases, any of which a message may match
    negated: list[str]    # words and phrases a message must not contain


def search_box_terms(query: str) -> SearchTerms:
    """A person's query: terms, `-excluded` terms, and `or` (the default, dropped)."""
    positive: list[str] = []
    negated: list[str] = []
    for minus, quoted, bare in _TOKEN.findall(query):
        if bare:
            minus, text = ("-", bare[1:]) if bare.startswith("-") else ("", bare)
            text = text.strip('"')
            if not minus and text.lower() == "or":
                continue
        else:
            text = quoted
        text = text.strip()
        if text:
            (negated if minus else positive).append(text[:MAX_TERM_CHARS])
    return SearchTerms(positive[:MAX_TERMS], negated[:MAX_TERMS])
