"""Reads the API's `GET /v1/status`: the operator's only view of mode and coverage.

The operator never connects to the database: it asks the API with a `status` token, a credential
that answers GET /v1/status and nothing else. By default it is the operator's own (generated into
the Secret NAME-status-token and registered by a Job); `spec.api.statusTokenSecretRef` may name
another `status` token (`backscroll tokens create --kind status`) instead.
"""

from __future__ import annotations

import httpx


class Unreadable(Exception):
    """Why the status could not be read, in words for a condition's message."""


def read(url: str, token: str, timeout: float) -> dict:
    try:
        response = httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout)
    except httpx.TimeoutException:
        raise Unreadable(f"GET {url} timed out after {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise Unreadable(f"GET {url} failed: {exc.__class__.__name__}") from None
    if response.status_code in (401, 403):
        raise Unreadable(f"GET {url} refused the token ({response.status_code}): the status endpoint "
                         f"needs a registered `status` token (`backscroll tokens create --kind status`)")
    if response.status_code != 200:
        raise Unreadable(f"GET {url} answered {response.status_code}")
    try:
        body = response.json()
    except ValueError:
        raise Unreadable(f"GET {url} did not answer JSON") from None
    if not isinstance(body, dict) or body.get("mode") not in ("hybrid", "lexical", "degraded"):
        raise Unreadable(f"GET {url} did not answer a Backscroll status")
    return body
