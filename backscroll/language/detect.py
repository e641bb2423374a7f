"""The detector: py3langid (a maintained fork of langid.py, its model bundled in the wheel)
restricted to the languages both it and this PostgreSQL know, and to `search_languages` when set.

Restricting the candidate set matters as much as the model: a short English message is often
scored as a language with no stemmer at all. Below `language_min_confidence` a message keeps
its words only (NONE), which is what it had before stemming existed: never worse.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import psycopg

from ..config import LanguageSettings
from ..errors import BadRequest
from .snowball import NONE, SNOWBALL

# The first characters say the language as well as the whole text and bound the cost of a long one.
SAMPLE_CHARS = 2000
# A query is read as a sentence of its language (and its function words left out) from this many words.
QUERY_MIN_WORDS = 3
CONFIGS = "select cfgname::text as name from pg_ts_config where cfgname = any(%(names)s::text[])"

_lock = threading.Lock()
_cache: dict[tuple, Detector] = {}


@dataclass(frozen=True)
class Detector:
    codes: tuple[str, ...]      # ISO codes it may answer
    min_confidence: float

    @property
    def configs(self) -> tuple[str, ...]:
        """The stemming configurations of those languages, in a stable order."""
        return tuple(SNOWBALL[c] for c in self.codes)

    def detect(self, text: str | None) -> str:
        """The stemming configuration of `text`'s language, or NONE."""
        if not text or not self.codes:
            return NONE
        code, confidence = _identifier(self.codes).classify(text[:SAMPLE_CHARS])
        return SNOWBALL[code] if confidence >= self.min_confidence and code in SNOWBALL else NONE

    def detect_all(self, texts: list[str | None]) -> list[str]:
        return [self.detect(t) for t in texts]

    def query_language(self, query: str) -> str | None:
        """The stemming configuration of a query's language when it reads as a sentence
        (QUERY_MIN_WORDS or more): a word or two says too little about its language."""
        if len(query.split()) < QUERY_MIN_WORDS:
            return None
        found = self.detect(query)
        return None if found == NONE else found


_identifiers: dict[tuple[str, ...], object] = {}


def _identifier(codes: tuple[str, ...]):
    with _lock:
        found = _identifiers.get(codes)
        if found is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            found = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
            found.set_languages(list(codes))
            _identifiers[codes] = found
    return found


def _known_codes() -> set[str]:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return set(LanguageIdentifier.from_model_file(MODEL_FILE).nb_classes)


def _wanted(language: LanguageSettings) -> list[str]:
    wanted = [c.strip() for c in language.search_languages.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in SNOWBALL]
    if unknown:
        raise BadRequest(f"search_languages: no stemmer for {', '.join(unknown)}; known: {', '.join(sorted(SNOWBALL))}",
                         code="invalid_search_languages")
    return wanted or list(SNOWBALL)


def detector(conn: psycopg.Connection, language: LanguageSettings) -> Detector:
    """The detector for these settings and this PostgreSQL's configurations (read once per
    process: one process talks to one server)."""
    key = (language.search_languages, language.language_min_confidence)
    found = _cache.get(key)
    if found is not None:
        return found
    wanted = _wanted(language)
    names = [SNOWBALL[c] for c in wanted]
    present = {r[0] if isinstance(r, tuple) else r["name"]
               for r in conn.execute(CONFIGS, {"names": names}).fetchall()}
    known = _known_codes()
    codes = tuple(sorted(c for c in wanted if SNOWBALL[c] in present and c in known))
    found = Detector(codes, language.language_min_confidence)
    with _lock:
        _cache[key] = found
    return found


def stemmers(conn: psycopg.Connection, language: LanguageSettings) -> list[str]:
    """The configurations a query word is read through under `multilingual`."""
    return list(detector(conn, language).configs)
