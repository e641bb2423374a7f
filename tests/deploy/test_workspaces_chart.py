"""The chart's `workspaces:` render SearchWorkspaces the CRD accepts and the operator parses, and
`operator.tokenNamespaces` grants Secrets (and nothing else) in each namespace it names (issue 32)."""

from __future__ import annotations

import json

from openapi_schema_validator import OAS30Validator

from backscroll_operator import workspaces
from tests.deploy.conftest import CHART, documents, of_kind, run

VALUES = [{"name": "acme", "spec": {"slug": "acme", "tokens": [
              {"name": "slack-connector", "kind": "ingest", "secret": {"name": "acme-slack-ingest"}}]}},
          {"name": "acme-agents", "namespace": "team-b", "spec": {"indexRef": {"name": "other"}, "slug": "acme",
           "tokens": [{"name": "rt", "kind": "runtime", "agents": ["concierge"],
                       "secret": {"name": "acme-runtime", "namespace": "agents"}}]}}]


def render(helm: str, *args: str) -> list[dict]:
    done = run(helm, "template", "rel", str(CHART), "--namespace", "backscroll", *args)
    assert done.returncode == 0, done.stderr
    return documents(done.stdout)


def test_workspaces_render_searchworkspaces(helm):
    docs = render(helm, "--set-json", f"workspaces={json.dumps(VALUES)}", "--set", "operator.watchNamespaces={backscroll,team-b}")
    first, second = of_kind(docs, "SearchWorkspace")
    assert (first["metadata"]["namespace"], first["spec"]["indexRef"]) == ("backscroll", {"name": "search"})
    assert (second["metadata"]["namespace"], second["spec"]["indexRef"]) == ("team-b", {"name": "other"})
    schema = workspaces.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for doc in (first, second):
        assert list(OAS30Validator(schema).iter_errors(doc)) == []
        workspaces.parse(doc["spec"])
    assert not of_kind(render(helm), "SearchWorkspace"), "none by default"


def test_helm_refuses_a_workspace_the_crd_would_not_keep(helm):
    """workspaces[].spec is the CRD's spec schema, closed (charts/sync_chart.py): a misspelt field
    fails the install instead of being pruned by the API server, a wrong kind before it is applied."""
    for token in ({"name": "t", "kind": "ingest", "secret": {"name": "s"}, "agent": ["x"]},
                  {"name": "t", "kind": "reader", "secret": {"name": "s"}}):
        values = [{"name": "acme", "spec": {"slug": "acme", "tokens": [token]}}]
        done = run(helm, "template", "rel", str(CHART), "--set-json", f"workspaces={json.dumps(values)}")
        assert done.returncode != 0 and "workspaces" in done.stderr, done.stderr


def test_token_namespaces_grant_secrets_only_there(helm):
    docs = render(helm, "--set", "operator.tokenNamespaces={agents}")
    (role,) = [r for r in of_kind(docs, "Role") if r["metadata"]["name"] == "rel-backscroll-tokens"]
    assert role["metadata"]["namespace"] == "agents"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "patch", "delete"]}]
    (binding,) = [b for b in of_kind(docs, "RoleBinding") if b["metadata"]["name"] == "rel-backscroll-tokens"]
    assert binding["subjects"][0]["name"] == "rel-backscroll" and binding["metadata"]["namespace"] == "agents"
    assert not [r for r in of_kind(render(helm), "Role") if r["metadata"]["name"].endswith("-tokens")]
