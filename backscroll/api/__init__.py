"""The HTTP API: FastAPI over a psycopg pool."""

from .app import create_app

__all__ = ["create_app"]
