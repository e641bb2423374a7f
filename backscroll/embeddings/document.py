"""The document text of a message: what the worker and the backfill embed for it."""

from __future__ import annotations

from typing import Mapping


def document_text(row: Mapping, max_chars: int = 2000) -> str:
    """What is embedded for a message: its speaker's name (when the workspace puts names in
    documents), then the start of its body. People ask what a person said, and a person's own
    messages rarely contain their name. (The row also carries the role and the title.)"""
    speaker = (row.get("speaker") or "").strip()
    return (f"{speaker}: {row['body']}" if speaker else row["body"])[:max_chars]
