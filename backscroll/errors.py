"""Errors that carry their HTTP status, so every layer can raise and the API answers with JSON."""

from __future__ import annotations


class BackscrollError(Exception):
    """Base class: `status` is the HTTP status, `code` a stable machine-readable name."""

    status = 500
    code = "internal_error"
    # The command line's exit status for it; the operator reads a Job's (see SchemaNewerThanImage).
    exit_code = 1

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status

    def to_dict(self) -> dict:
        return {"error": {"code": self.code, "message": self.message}}


class BadRequest(BackscrollError):
    status = 400
    code = "bad_request"


class BodyTooLong(BadRequest):
    """A body longer than IngestSettings.body_max_chars, on whichever path wrote it (ingest.models.check_body)."""

    code = "body_too_long"


class Unauthenticated(BackscrollError):
    status = 401
    code = "unauthenticated"


class Forbidden(BackscrollError):
    status = 403
    code = "forbidden"


class NotFound(BackscrollError):
    status = 404
    code = "not_found"


class Conflict(BackscrollError):
    status = 409
    code = "conflict"


class Unavailable(BackscrollError):
    status = 503
    code = "unavailable"


class Busy(Unavailable):
    """No room for the request now (no database connection, no free body read): retry shortly."""

    code = "busy"


class RetriesExhausted(Unavailable):
    """A request rolled back by deadlocks or serialization failures every time it was run."""

    code = "conflict_retry_exhausted"

    def __init__(self, attempts: int):
        super().__init__(f"the request met concurrent writes {attempts} times in a row and was rolled back "
                         "each time; nothing was stored: retry it")


class MigrationError(BackscrollError):
    """A migration could not be applied, or an applied one no longer matches its file."""

    status = 500
    code = "migration_error"


class SchemaNewerThanImage(MigrationError):
    """The database holds a contract migration this build does not know (docs/upgrades.md). Its
    own exit status, so that the operator tells it apart from a failed migration in the Job's
    status (operator/backscroll_operator/status.py, EXIT_REASONS) and does not retry it."""

    status = 503
    code = "schema_newer_than_image"
    exit_code = 3


class DatabaseOwnedElsewhere(BackscrollError):
    """The database was claimed by another SearchIndex (store/owner.py); exit status as above."""

    status = 409
    code = "database_owned_elsewhere"
    exit_code = 4


class DeclarationRefused(BackscrollError):
    """A declared workspace (`backscroll workspaces apply`, a SearchWorkspace's registration Job)
    that no retry can apply: a retired slug, a secret of a revoked or another token, a malformed
    declaration. Its own exit status, so that the operator fails the Job at once (podFailurePolicy,
    operator/backscroll_operator/workspaces.py REFUSED_EXIT) instead of retrying it for minutes."""

    status = 409
    code = "declaration_refused"
    exit_code = 5
