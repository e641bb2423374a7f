"""Words every layer shares: the text a message may hold, the ids and slugs callers send, the
largest id a keyset can hold, and the limits every write path holds to. Pure types, no
behaviour: writes, links, turns, search and the API's path parameters all validate against these."""

from __future__ import annotations

import unicodedata
from typing import Annotated

from pydantic import AfterValidator, Field

# The first page starts "before" the largest position a keyset can hold.
MAX_ID = 9_223_372_036_854_775_807

# Limits, named once so that no write path is wider than another (issue 29): a request's whole
# body, counted in bytes before anything parses it (app.BodyLimit answers 413), and a
# conversation's title, wherever it arrives (POST /v1/conversations, an import line). The longest
# body of a message, a reply or a memory is a setting (IngestSettings.body_max_chars), checked by
# ingest.models.check_body on every path that writes one.
MAX_REQUEST_BYTES = 8 * 1024 * 1024
MAX_TITLE_CHARS = 1000


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    return value


def _encodable(value: str) -> str:
    # JSON can spell a lone UTF-16 surrogate ("\ud800"); PostgreSQL cannot store one.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"must be valid Unicode (lone surrogate at character {exc.start})") from None
    return value


Text = Annotated[str, AfterValidator(_no_nul), AfterValidator(_encodable)]


def nfc(value: str) -> str:
    """Unicode's composed form (NFC): `é` typed as one character or as `e` and a combining accent
    is one word, in a document and in a query alike."""
    return unicodedata.normalize("NFC", value)


# What people write and search (bodies, titles, names, queries), stored and matched composed.
# Identifiers (external ids, namespaces) stay exactly as the caller sent them.
Prose = Annotated[Text, AfterValidator(nfc)]
Slug = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]
ExternalId = Annotated[Text, Field(min_length=1, max_length=256)]
Title = Annotated[Prose, Field(max_length=MAX_TITLE_CHARS)]
