"""Validation of rendered manifests: built-in kinds against Kubernetes' own schemas, SearchIndexes
against the CRD's openAPIV3Schema (kubernetes-validate skips custom resources silently)."""

from __future__ import annotations

import kubernetes_validate
from openapi_schema_validator import OAS30Validator

from backscroll_operator import workspaces
from backscroll_operator.spec import parse

SEARCH_INDEX = ("search.backscroll.dev/v1alpha1", "SearchIndex")
SEARCH_WORKSPACE = ("search.backscroll.dev/v1alpha1", "SearchWorkspace")


def problems(docs: list[dict], crd_schema: dict, version: str) -> list[str]:
    found = []
    for doc in docs:
        name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        if (doc.get("apiVersion"), doc.get("kind")) == SEARCH_INDEX:
            errors = [e.message for e in OAS30Validator(crd_schema).iter_errors(doc)]
            found += [f"{name}: {e}" for e in errors]
            if not errors:
                parse(doc["spec"])  # and the operator accepts what the API server would
            continue
        if (doc.get("apiVersion"), doc.get("kind")) == SEARCH_WORKSPACE:
            schema = workspaces.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            errors = [e.message for e in OAS30Validator(schema).iter_errors(doc)]
            found += [f"{name}: {e}" for e in errors]
            if not errors:
                workspaces.parse(doc["spec"])
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            found.append(f"{name}: {exc.message} at {list(exc.path)}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            found.append(f"{name}: no schema for it in Kubernetes {version} ({exc})")
    return found
