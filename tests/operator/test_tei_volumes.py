"""TEI replicas and volumes (issue 31, item 4): a model cache on a claim is mounted read-write by
every replica, and a ReadWriteOnce claim attaches to one node only, so 2+ replicas spread over
nodes hang on Multi-Attach. The combination is refused, with the same words, by the real API
server (the CRD's CEL rule) and by the operator's own spec check (for servers without the rule)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from backscroll_operator.spec import MULTI_ATTACH, SpecError, parse

from .conftest import CRD

BASE = {"image": "backscroll:1", "database": {"secretRef": {"name": "db"}}}


def server(**fields) -> dict:
    return {**BASE, "embeddings": {"model": "m", "dimensions": 8, "server": fields}}


def _crd_message() -> str:
    (version,) = yaml.safe_load(CRD.read_text())["spec"]["versions"]
    rules = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["embeddings"]["properties"][
        "server"]["x-kubernetes-validations"]
    (rule,) = [r for r in rules if "modelCache.claimName" in r["rule"]]
    return rule["message"]


def test_a_claim_model_cache_with_two_replicas_is_refused_by_the_operator():
    with pytest.raises(SpecError) as err:
        parse(server(replicas=2, modelCache={"claimName": "weights"}))
    assert err.value.field == "spec.embeddings.server"
    assert err.value.message == MULTI_ATTACH == " ".join(_crd_message().split())
    # What stays allowed: one replica on the claim, many on emptyDir caches, many on a read-only volume.
    assert parse(server(replicas=1, modelCache={"claimName": "weights"}))
    assert parse(server(replicas=3))
    assert parse(server(replicas=3, modelSource={"volume": {"claimName": "prepared"}}))


def test_the_api_server_refuses_a_claim_model_cache_with_two_replicas(kubectl):
    index = {"apiVersion": "search.backscroll.dev/v1alpha1", "kind": "SearchIndex", "metadata": {"name": "tei"},
             "spec": server(replicas=2, modelCache={"claimName": "weights"})}
    done = kubectl.run("apply", "-f", "-", input=json.dumps(index))
    assert done.returncode != 0
    assert "spec.embeddings.server" in done.stderr
    assert " ".join(MULTI_ATTACH.split()[:6]) in re.sub(r"\s+", " ", done.stderr), done.stderr
    index["spec"] = server(replicas=1, modelCache={"claimName": "weights"})
    assert "created" in kubectl("apply", "-f", "-", input=json.dumps(index))
