"""A small synchronous Kubernetes client: get, create, patch, delete and list plain dicts.

The `kubernetes` package is used for what it does well, finding and refreshing credentials
(in-cluster service account, kubeconfig, exec plugins), and not for its typed models: they
re-validate every answer and would turn the builders' dicts into objects and back.
"""

from __future__ import annotations

import os
import ssl

import httpx

# (api prefix, plural) of every kind the operator touches.
RESOURCES = {
    "deployments": "/apis/apps/v1",
    "jobs": "/apis/batch/v1",
    "services": "/api/v1",
    "secrets": "/api/v1",
    "pods": "/api/v1",
    "clusters": "/apis/postgresql.cnpg.io/v1",
    "backups": "/apis/postgresql.cnpg.io/v1",
    "events": "/api/v1",
    "poddisruptionbudgets": "/apis/policy/v1",
    "horizontalpodautoscalers": "/apis/autoscaling/v2",
    "networkpolicies": "/apis/networking.k8s.io/v1",
    "searchindexes": "/apis/search.backscroll.dev/v1alpha1",
    "searchworkspaces": "/apis/search.backscroll.dev/v1alpha1",
}
FIELD_MANAGER = "backscroll-operator"


class KubeError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    pass


def bearer(cfg) -> str | None:
    """The Authorization header value; calling it refreshes expiring tokens (exec plugins).
    kubernetes >= 36 keeps the token under BearerToken, older versions under authorization."""
    return cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix("authorization")


class NoCredentials(Exception):
    pass


def configuration():
    from kubernetes import client, config

    cfg = client.Configuration()
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)
        return cfg
    # The path is read now, not when `kubernetes` was imported (it caches $KUBECONFIG then).
    path = os.path.expanduser(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0])
    try:
        config.load_kube_config(config_file=path, client_configuration=cfg)
    except (config.ConfigException, OSError) as exc:
        raise NoCredentials(f"no Kubernetes credentials: not in a pod, and the kubeconfig {path} "
                            f"cannot be used ({exc}); set KUBECONFIG or run `kubectl config view`") from None
    return cfg


class Kube:
    def __init__(self, cfg=None, timeout: float = 30.0):
        self.cfg = cfg or configuration()
        tls = ssl.create_default_context(cafile=self.cfg.ssl_ca_cert)
        if not self.cfg.verify_ssl:  # insecure-skip-tls-verify in the kubeconfig
            tls.check_hostname = False
            tls.verify_mode = ssl.CERT_NONE
        if self.cfg.cert_file:  # client-certificate authentication
            tls.load_cert_chain(self.cfg.cert_file, self.cfg.key_file)
        self.http = httpx.Client(base_url=self.cfg.host, verify=tls, timeout=timeout)

    def _headers(self, content_type: str = "application/json") -> dict:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        token = bearer(self.cfg)
        if token:
            headers["Authorization"] = token
        return headers

    @staticmethod
    def _path(resource: str, namespace: str, name: str | None = None) -> str:
        path = f"{RESOURCES[resource]}/namespaces/{namespace}/{resource}"
        return f"{path}/{name}" if name else path

    def _send(self, method: str, path: str, body=None, params=None, content_type="application/json") -> dict:
        response = self.http.request(method, path, json=body, params=params, headers=self._headers(content_type))
        if response.status_code >= 400:
            try:
                message = response.json().get("message") or response.text
            except ValueError:
                message = response.text
            error = {404: NotFound, 409: Conflict}.get(response.status_code, KubeError)
            raise error(response.status_code, f"{method} {path}: {message}")
        return response.json() if response.content else {}

    def get(self, resource: str, namespace: str, name: str) -> dict | None:
        try:
            return self._send("GET", self._path(resource, namespace, name))
        except NotFound:
            return None

    def list(self, resource: str, namespace: str | None, labels: dict[str, str]) -> list[dict]:
        """Objects with these labels in `namespace` (None: every namespace)."""
        selector = ",".join(f"{k}={v}" for k, v in labels.items())
        path = self._path(resource, namespace) if namespace else f"{RESOURCES[resource]}/{resource}"
        items = self._send("GET", path, params={"labelSelector": selector} if selector else None).get("items")
        # Filtered here too: a selector is a request, and a server that ignored it (a proxy, a
        # test's in-memory client) must not make the operator act on another object's children.
        return [i for i in items or []
                if all((i.get("metadata", {}).get("labels") or {}).get(k) == v for k, v in labels.items())]

    def create(self, resource: str, namespace: str, body: dict) -> dict:
        return self._send("POST", self._path(resource, namespace), body)

    def apply(self, resource: str, namespace: str, name: str, body: dict, *, field_manager: str = FIELD_MANAGER,
              dry_run: bool = False) -> dict:
        """Server-side apply as the operator's field manager: the API server merges the manifest
        into the object, takes the fields it names back from whoever changed them (force), and
        removes fields an earlier apply set and this one no longer does. Fields the manifest
        does not name (replicas under an HPA) stay with their owners, if they have any.
        `dry_run`: the object as the server would store it (its defaults, its canonical forms),
        nothing stored."""
        params = {"fieldManager": field_manager, "force": "true"}
        if dry_run:
            params["dryRun"] = "All"
        return self._send("PATCH", self._path(resource, namespace, name), body, params=params,
                          content_type="application/apply-patch+yaml")

    def patch(self, resource: str, namespace: str, name: str, body, subresource: str = "",
              content_type: str = "application/merge-patch+json") -> dict:
        path = self._path(resource, namespace, name) + (f"/{subresource}" if subresource else "")
        return self._send("PATCH", path, body, content_type=content_type)

    def delete(self, resource: str, namespace: str, name: str) -> bool:
        # Background propagation: a Job's pods go with it (the default for Jobs orphans them).
        try:
            self._send("DELETE", self._path(resource, namespace, name),
                       {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"})
            return True
        except NotFound:
            return False
