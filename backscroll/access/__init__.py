"""Who may call: API tokens and principals (`auth`), keys derived from the root secret (`keys`),
and the privacy-preserving digests the search audit stores (`audit`).

Tokens and the admin audit are written by this package alone: tests/unit/test_write_owners.py."""

WRITES = ("api_tokens", "admin_audit")
