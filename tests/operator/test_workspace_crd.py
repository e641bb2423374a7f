"""The SearchWorkspace CRD is generated from its pydantic model (workspaces.crd, `make chart-sync`)
and committed in two places; its builders are pure and put no secret anywhere but the operator's
own Secret and the targets. No cluster: tests/operator/test_workspaces.py runs it for real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from openapi_schema_validator import OAS30Validator

from backscroll_operator import workspaces
from backscroll_operator.names import Owner
from backscroll_operator.spec import SpecError
from backscroll_operator.spec import parse as parse_index

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "k8s/samples").glob("searchworkspace-*.yaml"))
WS = Owner("acme", "team-a", "uid-1", workspaces.KIND)
INDEX = parse_index({"image": "ghcr.io/backscroll/backscroll:0.1.0", "database": {"secretRef": {"name": "db"}}})


def test_kustomize_applies_the_generated_crd():
    """The committed copies are the model's (tests/operator/test_crd.py, every generated file)."""
    assert "searchworkspaces.search.backscroll.dev.yaml" in (ROOT / "k8s/base/crd/kustomization.yaml").read_text()


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_samples_validate_and_parse(sample):
    schema = workspaces.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    doc = yaml.safe_load(sample.read_text())
    assert list(OAS30Validator(schema).iter_errors(doc)) == []
    assert workspaces.parse(doc["spec"]).tokens


def test_printer_columns():
    columns = [c["name"] for c in workspaces.crd()["spec"]["versions"][0]["additionalPrinterColumns"]
               if not c.get("priority")]
    assert columns == ["Index", "Slug", "Tokens", "Ready", "Age"]


@pytest.mark.parametrize("spec, field", [
    ({"indexRef": {"name": "s"}, "slug": "Acme"}, "spec.slug"),
    ({"indexRef": {"name": "s"}, "slug": "a", "tokens": [
        {"name": "x", "kind": "ingest", "agents": ["c"], "secret": {"name": "s"}}]}, "spec.tokens.0"),
    ({"indexRef": {"name": "s"}, "slug": "a", "tokens": [
        {"name": "x", "kind": "reader", "secret": {"name": "s"}}]}, "spec.tokens.0.kind"),
    ({"indexRef": {"name": "s"}, "slug": "a", "deletionPolicy": "erase"}, "spec.deletionPolicy"),
])
def test_refused_specs_name_their_field(spec, field):
    with pytest.raises(SpecError) as caught:
        workspaces.parse(spec)
    assert caught.value.field.startswith(field), caught.value


def test_the_registration_job_holds_no_secret_and_changes_with_them():
    spec = workspaces.parse({"indexRef": {"name": "search"}, "slug": "acme", "tokens": [
        {"name": "conn", "kind": "ingest", "secret": {"name": "acme-ingest"}},
        {"name": "rt", "kind": "runtime", "agents": ["concierge"], "secret": {"name": "rt", "namespace": "agents"}}]})
    secret = "bks_" + "x" * 43
    digests = {"conn": workspaces.token_digest(secret), "rt": workspaces.token_digest("bks_" + "y" * 43)}
    job = workspaces.register_job(WS, spec, INDEX, digests)
    text = json.dumps(job)
    assert secret not in text and "x" * 43 not in text
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"][:2] == ["workspaces", "apply"] and "sw:team-a/acme/" in container["args"]
    env = {e["name"]: e for e in container["env"]}
    assert env["BACKSCROLL_TOKEN_0"]["valueFrom"]["secretKeyRef"] == {"name": "acme-tokens", "key": "conn"}
    assert json.loads(env["BACKSCROLL_WORKSPACE_TOKENS"]["value"])[1] == {
        "name": "rt", "kind": "runtime", "agents": ["concierge"], "env": "BACKSCROLL_TOKEN_1"}
    assert job["metadata"]["ownerReferences"][0]["kind"] == "SearchWorkspace"
    assert job["spec"]["backoffLimit"] == 6
    rotated = workspaces.register_job(WS, spec, INDEX, {**digests, "conn": workspaces.token_digest("bks_" + "z" * 43)})
    assert rotated["metadata"]["name"] != job["metadata"]["name"]
    assert workspaces.register_job(WS, spec, INDEX, dict(digests))["metadata"]["name"] == job["metadata"]["name"]


def test_a_refused_declaration_fails_its_job_at_once():
    """`workspaces apply` exits DeclarationRefused's status on what no retry mends; the Job's
    podFailurePolicy fails on that status at once instead of retrying six times."""
    from backscroll.errors import DeclarationRefused

    assert workspaces.REFUSED_EXIT == DeclarationRefused.exit_code
    spec = workspaces.parse({"indexRef": {"name": "search"}, "slug": "acme", "tokens": []})
    job = workspaces.register_job(WS, spec, INDEX, {})
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert {"action": "FailJob", "onExitCodes": {"containerName": container["name"], "operator": "In",
                                                 "values": [DeclarationRefused.exit_code]}} \
        in job["spec"]["podFailurePolicy"]["rules"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_a_target_in_another_namespace_has_no_owner_reference():
    spec = workspaces.parse({"indexRef": {"name": "search"}, "slug": "acme", "tokens": [
        {"name": "conn", "kind": "ingest", "secret": {"name": "here"}},
        {"name": "rt", "kind": "runtime", "secret": {"name": "there", "namespace": "agents", "key": "t"}}]})
    here, there = (workspaces.target_secret(WS, t, "v") for t in spec.tokens)
    assert here["metadata"]["namespace"] == "team-a" and here["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert there["metadata"]["namespace"] == "agents" and "ownerReferences" not in there["metadata"]
    assert there["stringData"] == {"t": "v"}
    assert there["metadata"]["labels"][workspaces.WORKSPACE_LABEL] == "acme"


def test_the_deletion_job_erases_only_with_deletion_policy_delete():
    retain = workspaces.revoke_job(WS, INDEX)
    (container,) = retain["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["workspaces", "revoke-declared", "--prefix", "sw:team-a/acme/"]
    body = {"spec": {"indexRef": {"name": "search"}, "slug": "acme", "deletionPolicy": "delete"}}
    assert workspaces.parse(body["spec"]).deletion_policy == "delete"
    assert workspaces.erased_slug(body) == "acme"
    assert workspaces.erased_slug({"spec": {**body["spec"], "deletionPolicy": "retain"}}) is None
    assert workspaces.erased_slug({"spec": {"indexRef": {"name": "search"}, "slug": "acme"}}) is None
    erase = workspaces.revoke_job(WS, INDEX, "acme")
    assert erase == workspaces.revoke_job(WS, INDEX, "acme")  # pure
    (container,) = erase["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["workspaces", "erase", "acme", "--yes-erase-workspace-data",
                                 "--revoke-prefix", "sw:team-a/acme/"]
    # Another policy or another slug is another Job (a Job cannot change once created).
    assert erase["metadata"]["name"] != retain["metadata"]["name"]
    assert erase["metadata"]["name"] != workspaces.revoke_job(WS, INDEX, "other")["metadata"]["name"]
    assert erase["metadata"]["labels"]["app.kubernetes.io/component"] == workspaces.REVOKE
