"""Names, labels and hashes shared by the builders and the reconciler."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

GROUP = "search.backscroll.dev"
VERSION = "v1alpha1"
PLURAL = "searchindexes"
KIND = "SearchIndex"
API_VERSION = f"{GROUP}/{VERSION}"

MANAGED_BY = "backscroll-operator"
HASH_ANNOTATION = f"{GROUP}/applied-hash"
MODEL_ANNOTATION = f"{GROUP}/model"
# On the API and worker Deployments: the embeddings configuration (JSON) and the image their pods
# were given. The rollout reads them back to know what serves now (rollout.py).
EMBEDDINGS_ANNOTATION = f"{GROUP}/embeddings"
IMAGE_ANNOTATION = f"{GROUP}/image"
# On pod templates: which version of each Secret the pods read (name, uid, resourceVersion), so a
# rotated Secret rolls them. Never anything computed from a Secret's value (reconcile.check_secrets).
SECRETS_ANNOTATION = f"{GROUP}/secrets-version"
# On register Jobs: the uid of the token Secret they registered.
TOKEN_ANNOTATION = f"{GROUP}/token-secret-uid"
# The operator's finalizer, present only with spec.deletionPolicy: delete.
PURGE_FINALIZER = f"{GROUP}/purge-database"
FIELD_MANAGER = "backscroll-operator"
# The field manager that holds a Deployment's replicas between the operator letting go of them and
# an autoscaler taking them (reconcile.hand_over_replicas).
HANDOVER_MANAGER = "backscroll-operator-handover"

# Job names end up in the `job-name` label of their pods, and labels stop at 63 characters.
MAX_NAME = 63


@dataclass(frozen=True)
class Owner:
    """The object a child belongs to: a SearchIndex, or (kind) a SearchWorkspace."""

    name: str
    namespace: str
    uid: str
    kind: str = KIND

    @classmethod
    def from_body(cls, body, kind: str = KIND) -> Owner:
        meta = body["metadata"]
        return cls(name=meta["name"], namespace=meta["namespace"], uid=meta["uid"], kind=kind)

    def reference(self) -> dict:
        # controller=True lets `kubectl describe` and garbage collection know who owns the child;
        # blockOwnerDeletion keeps a foreground delete of the owner waiting for its children.
        return {"apiVersion": API_VERSION, "kind": self.kind, "name": self.name, "uid": self.uid,
                "controller": True, "blockOwnerDeletion": True}


def controller_of(body, kind: str) -> str | None:
    """The name of the object of `kind` (in the operator's group) that controls `body`, if any."""
    for ref in (body.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == kind and ref.get("controller") and ref.get("apiVersion", "").startswith(f"{GROUP}/"):
            return ref.get("name")
    return None


def short_hash(value, length: int = 8) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def child_name(owner: str, *parts: str) -> str:
    """`owner-part-part`, cut to a valid object name; a cut name keeps a hash of the whole so two
    long names do not collide."""
    name = "-".join([owner, *parts])
    if len(name) <= MAX_NAME:
        return name
    return f"{name[:MAX_NAME - 9].rstrip('-')}-{short_hash(name)}"


def model_slug(model: str) -> str:
    """A model name as a name part: `arctic-embed-l-v2.0@256` → `arctic-embed-l-v2-0-256-<hash>`.

    The hash keeps `a.b` and `a-b` apart; the readable part lets `kubectl get jobs` tell the
    models apart at a glance.
    """
    readable = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")[:24].rstrip("-") or "model"
    return f"{readable}-{short_hash(model, 6)}"


def labels(owner: str, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "backscroll", "app.kubernetes.io/instance": owner,
            "app.kubernetes.io/component": component, "app.kubernetes.io/managed-by": MANAGED_BY}


def selector(owner: str, component: str) -> dict[str, str]:
    # The stable subset: a Deployment's selector is immutable, so it never includes anything
    # that could change between operator versions.
    return {"app.kubernetes.io/instance": owner, "app.kubernetes.io/component": component}
