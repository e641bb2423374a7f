"""Search audit digests: a keyed HMAC of the normalized query, never the query itself.

The key is derived from BACKSCROLL_MASTER_KEY only. The installation key lives in the same
database as the audit rows, so a digest under it would let anyone who can read the table
confirm guesses of short keyword queries; without a master key the digest is left empty.
"""

from __future__ import annotations

import hashlib
import hmac
import unicodedata

from ..config import AccessSettings
from .keys import derive


def normalize(query: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", query).casefold().split())


def query_digest(access: AccessSettings, query: str) -> bytes | None:
    if access.master_key is None:
        return None
    key = derive(access.master_key.get_secret_value().encode(), "search-audit")
    return hmac.new(key, normalize(query).encode(), hashlib.sha256).digest()


# Admin actions (sql/0031 admin_audit): who (the token and its scope), what, on which workspace
# (slug) or token (id), and how it ended. Never a secret, never a request's text beyond ids and slugs.
RECORD_ADMIN_ACTION = """
insert into admin_audit (token_id, token_workspace_id, action, target_workspace, target_token_id, outcome)
values (%(token_id)s, %(token_ws)s, %(action)s, %(workspace)s, %(target_token)s, %(outcome)s)
"""


def record_admin_action(conn, principal, action: str, *, workspace: str | None = None,
                        token_id: int | None = None, outcome: str = "ok") -> None:
    conn.execute(RECORD_ADMIN_ACTION, {"token_id": principal.token_id, "token_ws": principal.workspace_id,
                                       "action": action, "workspace": workspace, "target_token": token_id,
                                       "outcome": outcome})
