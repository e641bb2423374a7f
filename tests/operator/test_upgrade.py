"""An operator upgrade across versions on the real control plane, as a rolling upgrade does it:
the release's CRD applied first (it grew a field with a default, which the API server then fills
into every object as it reads it), the new operator's pod started beside the old one, which stops
and hands the Lease over; then back.

Operator N is played by this code with the rule of the releases before issue 31 (a field it does
not know makes the spec invalid: `spec.futureField: Extra inputs are not permitted`), on its own
replica only, so that the wedge this test undoes is the real one: every index InvalidSpec at an
unchanged generation, which the new leader's resync then skipped."""

from __future__ import annotations

import copy
import json
import time

import pytest

from backscroll_operator.spec import SpecError, unknown_fields

from .conftest import eventually
from .test_ha import HA, holder
from .test_scenarios import available, bring_up, condition

N, N1 = "1.0.0", "1.1.0"
FAST = dict(HA, interval_s=1.0)  # resyncs every second: each step is seen within one
FIELD = "futureField"


def grown(crd: dict) -> dict:
    """The CRD of release N+1: spec.futureField, a string defaulting to "on"."""
    newer = copy.deepcopy(crd)
    spec = newer["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"][FIELD] = {"type": "string", "default": "on", "description": "Added by release N+1."}
    return newer


def apply_crd(control_plane, body: dict) -> None:
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(body))


def refuses_unknown_fields(replica) -> None:
    """The rule of the operators before this one, on this replica alone."""
    def strict(spec: dict) -> None:
        for path in unknown_fields(spec):
            raise SpecError(path, "Extra inputs are not permitted")
    replica.passes._say_unknown = strict


def resumed(replica) -> None:
    """Until the replica's kopf has listed the index and handled it, as a follower (a pass only the
    leader runs): a new pod is Ready before the rolling update stops the old one. Its kopf keeps
    its own record of what it handled, so the index is new to it."""
    eventually(lambda: "Handler 'reconcile' succeeded" in replica.kopf_output)
    assert not replica.passes.leads()


def index_versions(api, seconds: float = 5.0) -> set[str]:
    """The SearchIndex's resourceVersions seen over `seconds`: each one is a write to it."""
    seen: set[str] = set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        seen.add(api.get("searchindexes", "search")["metadata"]["resourceVersion"])
        time.sleep(0.05)
    return seen


def test_an_upgrade_across_a_crd_that_grew_a_defaulted_field_and_back(api, operators, status_server, control_plane,
                                                                       crd):
    old = operators("replica-n", version=N, **FAST)
    refuses_unknown_fields(old)
    eventually(lambda: holder(api) == "replica-n")
    bring_up(api, status_server, embeddings=False)
    generation = api.get("searchindexes", "search")["metadata"]["generation"]
    try:
        apply_crd(control_plane, grown(crd))
        eventually(lambda: api.get("searchindexes", "search")["spec"].get(FIELD) == "on")
        # What the issue saw: operator N refuses the field the new CRD defaulted, at an unchanged generation.
        eventually(lambda: condition(api, "search", "Ready").get("reason") == "InvalidSpec")
        assert FIELD in condition(api, "search", "Ready")["message"]
        assert api.get("searchindexes", "search")["metadata"]["generation"] == generation

        # The rolling upgrade: N+1 starts beside N (a follower), then N stops and hands the Lease over.
        new = operators("replica-n1", version=N1, **FAST)
        resumed(new)
        # Both replicas' kopf watch the index, N's still through the server's storage for the old
        # schema (without the field): they must not take turns writing their views back to it.
        versions = index_versions(api)
        assert len(versions) <= 2, f"{len(versions)} writes to the index in 5 s while N and N+1 both ran"
        old.stop()
        eventually(lambda: holder(api) == "replica-n1")
        # N+1 judges the index again although its generation did not change, and reconciles it.
        eventually(lambda: condition(api, "search", "Ready").get("status") == "True")
        status = api.get("searchindexes", "search")["status"]
        assert status["operatorVersion"] == N1 and status["observedGeneration"] == generation
        # It keeps reconciling what it knows, and names the field it does not know once.
        api.patch("searchindexes", "search", {"spec": {"api": {"replicas": 1}}})
        eventually(lambda: available(api, "search-api") == 1 and
                   api.get("deployments", "search-api")["spec"]["replicas"] == 1)
        eventually(lambda: condition(api, "search", "Ready").get("observedGeneration") == generation + 1)
        said = [line for line in new.output.splitlines() if f"spec.{FIELD} is not known" in line]
        assert len(said) == 1, said

        # And back: N (a release with the tolerance) takes over again; the CRD stays N+1's, as Helm leaves it.
        back = operators("replica-n-again", version=N, **FAST)
        resumed(back)
        new.stop()
        eventually(lambda: holder(api) == "replica-n-again")
        eventually(lambda: (api.get("searchindexes", "search")["status"] or {}).get("operatorVersion") == N)
        assert condition(api, "search", "Ready").get("status") == "True"
        api.patch("searchindexes", "search", {"spec": {"api": {"replicas": 2}}})
        eventually(lambda: available(api, "search-api") == 2)
        # Ready once the pass after the scale-up has read the rollout (it may trail the Deployment).
        eventually(lambda: condition(api, "search", "Ready").get("observedGeneration") == generation + 2 and
                   condition(api, "search", "Ready").get("status") == "True")
    finally:
        apply_crd(control_plane, crd)
        eventually(lambda: FIELD not in (api.get("searchindexes", "search") or {"spec": {}})["spec"])
