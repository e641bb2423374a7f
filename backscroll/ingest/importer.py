"""`backscroll import FILE.jsonl`: bulk loads, one conversation per line.

Each line lands in its own transaction, so a bad line is reported with its number and
skipped without leaving half of itself behind; re-running a file changes nothing that is
already there (conversations and messages are keyed by their external ids).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, TextIO

import psycopg
from pydantic import ValidationError

from ..config import IngestSettings
from ..errors import BackscrollError, BadRequest, Forbidden
from . import conversations, messages, workspaces
from .models import ImportLine, check_body

# `backscroll import` reads no settings of its own: it holds to the limit's declared default.
DEFAULT_BODY_MAX_CHARS = IngestSettings.model_construct().body_max_chars
# One answer whether the workspace a line names exists or not: slugs are customer names.
NOT_YOURS = "workspace: this token writes to its own workspace only (leave `workspace` out)"


@dataclass
class ImportReport:
    lines: int = 0
    conversations: int = 0
    messages_created: int = 0
    rejected: list[tuple[int, str]] = field(default_factory=list)
    codes: dict[int, str] = field(default_factory=dict)  # a rejected line's error code, as the API names it
    accepted: list[tuple[int, int, int]] = field(default_factory=list)  # (line, conversation id, messages created)

    def as_dict(self) -> dict:
        return {"lines": self.lines, "conversations": self.conversations, "messages_created": self.messages_created,
                "accepted": [{"line": n, "conversation_id": c, "messages_created": m} for n, c, m in self.accepted],
                "rejected": [{"line": n, "code": self.codes[n], "error": reason} for n, reason in self.rejected]}

    def reject(self, number: int, exc: Exception) -> None:
        code, reason = _rejection(exc)
        self.rejected.append((number, reason))
        self.codes[number] = code


def _rejection(exc: Exception) -> tuple[str, str]:
    """A bad line's error code and reason: the code the API answers the same mistake with
    elsewhere (`invalid_request`, `body_too_long`, ...), so a line is refused like a request."""
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ())) or "line"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return "invalid_request", f"{loc}: {err.get('msg')}{more}"
    if isinstance(exc, UnicodeDecodeError):
        return "invalid_request", f"not UTF-8 (byte {exc.start})"
    if isinstance(exc, json.JSONDecodeError):
        return "invalid_request", f"not valid JSON: {exc.msg} at column {exc.colno}"
    if isinstance(exc, BackscrollError):
        return exc.code, exc.message
    if isinstance(exc, psycopg.errors.DataError | psycopg.errors.IntegrityError):
        return "invalid_request", f"rejected by the database: {exc.diag.message_primary}"
    raise exc


def _parse(data: bytes) -> object:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, 100,000 nested brackets
        raise BadRequest(f"not valid JSON: {str(exc).split(':')[0]}", code="invalid_request") from None


def import_line(conn: psycopg.Connection, workspace_id: int, line: ImportLine) -> tuple[int, int]:
    """One import line: a conversation and its messages. Returns (conversation id, messages created)."""
    if line.created_at is None:
        # History began with its first message, not when it was imported: otherwise every
        # imported conversation would read as active today, in file order.
        stamps = [m.created_at for m in line.messages if m.created_at is not None]
        if stamps:
            line = line.model_copy(update={"created_at": min(stamps)})
    conv_id, _ = conversations.upsert_conversation(conn, workspace_id, line)
    if any(msg.external_id is None for msg in line.messages):
        raise BadRequest("every imported message needs an external_id, so a re-run does not duplicate it")
    written = messages.append_messages(conn, workspace_id, conv_id, line.messages)
    return conv_id, sum(created for _, created in written)


def import_stream(
    conn: psycopg.Connection,
    stream: BinaryIO,
    *,
    default_workspace: str | None = None,
    progress: Callable[[int], None] | None = None,
    rejects: TextIO | None = None,
    workspace_id: int | None = None,
    body_max_chars: int = DEFAULT_BODY_MAX_CHARS,
) -> ImportReport:
    """Import JSON lines; with `workspace_id` (an ingest token's), every line lands there and a
    line naming another workspace is rejected."""
    report = ImportReport()
    workspace_ids: dict[str, int] = {}
    # A token's own workspace, by name: a line naming any other is refused before, and instead
    # of, looking that name up, so whether it exists is never told.
    own = workspaces.workspace_slug(conn, workspace_id) if workspace_id is not None else None
    for number, data in enumerate(stream, start=1):
        if progress is not None:
            progress(len(data))
        if not data.strip():
            continue
        report.lines += 1
        raw = data.decode("utf-8", errors="replace")
        try:
            line = ImportLine.model_validate(_parse(data))
            if workspace_id is not None:
                if line.workspace not in (None, own):
                    raise Forbidden(NOT_YOURS)
                slug = None
            else:
                slug = line.workspace or default_workspace
                if slug is None:
                    raise BadRequest("no workspace: give `workspace` on the line or --workspace")
            for i, message in enumerate(line.messages):
                check_body(body_max_chars, message.body, f"messages.{i}.body")
            with conn.transaction():
                if slug is not None and slug not in workspace_ids:
                    workspace_ids[slug] = workspaces.workspace_id_for(conn, slug, writable=True)
                target = workspace_id if slug is None else workspace_ids[slug]
                conv_id, created = import_line(conn, target, line)
            report.conversations += 1
            report.messages_created += created
            report.accepted.append((number, conv_id, created))
        except Exception as exc:  # noqa: BLE001 - _rejection re-raises what is not a bad line
            report.reject(number, exc)
            if rejects is not None:
                rejects.write(raw if raw.endswith("\n") else raw + "\n")
    return report


def import_file(conn: psycopg.Connection, path: Path, *, default_workspace: str | None = None,
                show_progress: bool = True, rejects_path: Path | None = None) -> ImportReport:
    from tqdm import tqdm

    total = path.stat().st_size
    rejects = rejects_path.open("w", encoding="utf-8") if rejects_path else None
    try:
        with path.open("rb") as stream, tqdm(
            total=total, unit="B", unit_scale=True, desc=f"importing {path.name}", disable=not show_progress
        ) as bar:
            return import_stream(conn, stream, default_workspace=default_workspace, progress=bar.update,
                                 rejects=rejects)
    finally:
        if rejects is not None:
            rejects.close()
