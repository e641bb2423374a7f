"""Every setting Backscroll reads, declared once with its help text.

Each field is read from the environment as ``BACKSCROLL_<NAME>`` (or a ``.env`` file).
``backscroll settings`` prints them all with their current values (secrets masked).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BACKSCROLL_", env_file=".env", extra="ignore")

    database_url: SecretStr | None = Field(
        default=None,
        description=(
            "PostgreSQL connection URI (PostgreSQL >= 15 with pgvector and pg_trgm). "
            "Unset: Backscroll starts an embedded PostgreSQL 18 in `data_dir`."
        ),
    )
    data_dir: Path = Field(
        default=Path(".backscroll/pgdata"),
        description="Data directory of the embedded PostgreSQL; kept between runs.",
    )
    host: str = Field(default="127.0.0.1", description="Address the API binds to.")
    port: int = Field(default=8080, ge=1, le=65535, description="Port the API listens on.")
    pool_min_size: int = Field(default=1, ge=0, description="Connections the API keeps open.")
    pool_max_size: int = Field(default=10, ge=1, description="Most connections the API opens.")
    statement_timeout_ms: int = Field(
        default=5000,
        ge=100,
        description="Longest a single API query may run before PostgreSQL cancels it (503).",
    )
    page_limit_default: int = Field(
        default=20, ge=1, description="Sessions per page when a request names no limit."
    )
    page_limit_max: int = Field(
        default=100, ge=1, description="Largest page a request may ask for; larger asks are clamped."
    )
    query_max_chars: int = Field(
        default=512,
        ge=16,
        description="Longest search text accepted; longer queries are refused with 400.",
    )
    excerpt_words: int = Field(
        default=24, ge=4, le=200, description="Most words in a content hit's excerpt."
    )
    body_max_chars: int = Field(
        default=1_000_000, ge=1, description="Longest message body ingestion accepts."
    )
    master_key: SecretStr | None = Field(
        default=None,
        description=(
            "Secret from which keys are derived (cursor signatures, audit digests). "
            "Unset: an installation key generated at migration time is used."
        ),
    )
    log_level: str = Field(default="info", description="Log level: debug, info, warning, error.")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
