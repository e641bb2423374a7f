"""The operator's own settings, each read from BACKSCROLL_OPERATOR_<NAME>."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class OperatorConfig(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BACKSCROLL_OPERATOR_", extra="ignore")

    interval_s: float = Field(
        default=30.0, gt=0,
        description="How often each SearchIndex is re-checked: children converged, Jobs advanced, "
                    "the API's status read.")
    retry_delay_s: float = Field(
        default=15.0, gt=0,
        description="Delay before retrying a change that waits on something (a missing Secret).")
    status_timeout_s: float = Field(
        default=5.0, gt=0, description="Longest the operator waits for the API's GET /v1/status.")
    status_url: str | None = Field(
        default=None,
        description="Where to read each index's status instead of its Service, for an operator "
                    "running outside the cluster: a template with {namespace}, {name}, {service} and "
                    "{port}, e.g. http://127.0.0.1:8080/v1/status with `kubectl port-forward "
                    "svc/search-api 8080`. (Not `kubectl proxy`: it replaces the Authorization header "
                    "that carries the admin token.)")
    namespaces: list[str] = Field(
        default_factory=list,
        description="Namespaces to watch (a JSON list); empty: every namespace.")
