"""The operator's own settings, each read from BACKSCROLL_OPERATOR_<NAME>."""

from __future__ import annotations

from pydantic import Field, model_validator
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
    migration_retry_s: float = Field(
        default=30.0, gt=0,
        description="Delay before a failed migration is tried again by a new Job (a new attempt); it "
                    "doubles with each failed attempt.")
    migration_retry_max_s: float = Field(
        default=900.0, gt=0, description="Longest delay between two attempts of a migration.")
    status_timeout_s: float = Field(
        default=5.0, gt=0, description="Longest the operator waits for the API's GET /v1/status.")
    status_url: str | None = Field(
        default=None,
        description="Where to read each index's status instead of its Service, for an operator "
                    "running outside the cluster: a template with {namespace}, {name}, {service} and "
                    "{port}, e.g. http://127.0.0.1:8080/v1/status with `kubectl port-forward "
                    "svc/search-api 8080`. (Not `kubectl proxy`: it replaces the Authorization header "
                    "that carries the status token.)")
    namespaces: list[str] = Field(
        default_factory=list,
        description="Namespaces to watch (a JSON list); empty: every namespace.")
    metrics_port: int | None = Field(
        default=None, ge=0, le=65535,
        description="Serve Prometheus metrics at :PORT/metrics, and the liveness probe at "
                    ":PORT/healthz (the Deployment: 9090); unset: no metrics server (unless --metrics).")
    metrics_host: str = Field(default="0.0.0.0", description="The address the metrics server listens on.")
    liveness_path: str = Field(default="/healthz", description="The liveness probe's path on the metrics server.")
    liveness_stale_s: float = Field(
        default=120.0, gt=0,
        description="The liveness probe fails once the operator has not listed SearchIndexes "
                    "successfully for this long (the API server unreachable, its credentials refused); "
                    "keep it a few times interval_s.")
    leader_election: bool = Field(
        default=True,
        description="Run passes only while holding a coordination.k8s.io/v1 Lease, so that replicas "
                    "can run side by side (one leads, the others watch and wait).")
    lease_name: str = Field(default="backscroll-operator", description="The Lease's name.")
    lease_namespace: str | None = Field(
        default=None,
        description="The Lease's namespace; unset: the pod's own (its service account's), else default.")
    lease_duration_s: int = Field(
        default=15, ge=1,
        description="How long a Lease that is not renewed holds: another replica takes over after it.")
    lease_renew_s: float = Field(
        default=5.0, gt=0, description="How often the leader renews (and a follower checks) the Lease.")
    identity: str | None = Field(
        default=None, description="This replica's holderIdentity; unset: the pod's hostname and a random suffix.")

    @model_validator(mode="after")
    def _renewal_fits_the_lease(self) -> OperatorConfig:
        # A leader acts for two thirds of the duration after a renewal: it must renew before that.
        if self.leader_election and self.lease_renew_s >= self.lease_duration_s * 2 / 3:
            raise ValueError(f"lease_renew_s ({self.lease_renew_s}) must be under two thirds of "
                             f"lease_duration_s ({self.lease_duration_s})")
        return self
