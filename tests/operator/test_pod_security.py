"""Every pod the operator creates passes the Pod Security Standards' `restricted` profile.

The checker below is written from the Kubernetes Pod Security Standards page
(https://kubernetes.io/docs/concepts/security/pod-security-standards/), control by control, for
the `baseline` policy (which `restricted` includes) and the `restricted` additions, and not from
the builders' constants: a builder that drops a field, or a new pod kind, fails here by the name
of the control it breaks. Containers, initContainers and ephemeralContainers are checked alike.
"""

from __future__ import annotations

import pytest

from backscroll_operator import builders, rollout
from backscroll_operator.names import Owner
from backscroll_operator.rollout import Observed
from backscroll_operator.spec import parse

# restricted, "Volume Types": only these volume sources.
ALLOWED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                   "projected", "secret"}
# baseline, "Capabilities": what may be added beyond the default set; restricted narrows it.
RESTRICTED_ADD = {"NET_BIND_SERVICE"}
# baseline, "Sysctls": the safe set.
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                "net.ipv4.tcp_keepalive_probes"}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
PROC_MOUNT = {None, "Default"}


def _containers(pod: dict) -> list[dict]:
    return [*(pod.get("containers") or []), *(pod.get("initContainers") or []),
            *(pod.get("ephemeralContainers") or [])]


def restricted_violations(pod: dict) -> list[str]:
    """The controls of `restricted` (baseline's included) that this pod spec breaks."""
    problems: list[str] = []
    psc = pod.get("securityContext") or {}
    containers = _containers(pod)

    # --- baseline ---
    # Host Namespaces: hostNetwork, hostPID, hostIPC unset or false.
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            problems.append(f"host namespaces: {field}")
    # HostProcess (Windows): unset or false, on the pod and every container.
    if (psc.get("windowsOptions") or {}).get("hostProcess"):
        problems.append("hostProcess: pod")
    for c in containers:
        sc = c.get("securityContext") or {}
        name = c.get("name")
        # Privileged Containers.
        if sc.get("privileged"):
            problems.append(f"privileged: {name}")
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            problems.append(f"hostProcess: {name}")
        # Host Ports: unset or 0.
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                problems.append(f"host ports: {name} {port['hostPort']}")
        # /proc Mount Type: Default.
        if sc.get("procMount") not in PROC_MOUNT:
            problems.append(f"procMount: {name}")
        # AppArmor: unset, RuntimeDefault or Localhost.
        if (sc.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
            problems.append(f"appArmor: {name}")
        # SELinux: type from the allowed set, no custom user or role.
        se = sc.get("seLinuxOptions") or {}
        if se.get("type", "") not in SELINUX_TYPES or se.get("user") or se.get("role"):
            problems.append(f"seLinux: {name}")
    se = psc.get("seLinuxOptions") or {}
    if se.get("type", "") not in SELINUX_TYPES or se.get("user") or se.get("role"):
        problems.append("seLinux: pod")
    if (psc.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
        problems.append("appArmor: pod")
    # HostPath Volumes: forbidden (and restricted's volume list leaves it out anyway).
    # Sysctls: only the safe set.
    for sysctl in psc.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            problems.append(f"sysctl: {sysctl.get('name')}")

    # --- restricted ---
    # Volume Types: only the listed sources.
    for volume in pod.get("volumes") or []:
        sources = set(volume) - {"name"}
        if not sources <= ALLOWED_VOLUMES:
            problems.append(f"volume types: {volume.get('name')} {sorted(sources - ALLOWED_VOLUMES)}")
    pod_non_root = psc.get("runAsNonRoot")
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    if psc.get("runAsUser") == 0:
        problems.append("runAsUser: pod is 0")
    for c in containers:
        sc = c.get("securityContext") or {}
        name = c.get("name")
        # Privilege Escalation: allowPrivilegeEscalation must be false on every container.
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"privilege escalation: {name}")
        # Running as Non-root: runAsNonRoot true on the pod or on every container, never false on one.
        non_root = sc.get("runAsNonRoot", pod_non_root)
        if non_root is not True:
            problems.append(f"runAsNonRoot: {name}")
        # Running as Non-root user: runAsUser, where set, is not 0.
        if sc.get("runAsUser") == 0:
            problems.append(f"runAsUser: {name} is 0")
        # Seccomp: RuntimeDefault or Localhost, on the pod or on every container; never Unconfined.
        seccomp = (sc.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in ("RuntimeDefault", "Localhost"):
            problems.append(f"seccomp: {name} {seccomp}")
        # Capabilities: drop ALL; add only NET_BIND_SERVICE.
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            problems.append(f"capabilities: {name} does not drop ALL")
        extra = set(caps.get("add") or []) - RESTRICTED_ADD
        if extra:
            problems.append(f"capabilities: {name} adds {sorted(extra)}")
    if pod_seccomp == "Unconfined":
        problems.append("seccomp: pod Unconfined")
    return problems


# --- the checker itself bites -------------------------------------------------------------------

GOOD = {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": False,
                                                         "capabilities": {"drop": ["ALL"]}}}],
        "volumes": [{"name": "tmp", "emptyDir": {}}]}


def _broken(change) -> dict:
    import copy
    pod = copy.deepcopy(GOOD)
    change(pod)
    return pod


@pytest.mark.parametrize("change,control", [
    (lambda p: p.update(hostNetwork=True), "host namespaces"),
    (lambda p: p.update(hostPID=True), "host namespaces"),
    (lambda p: p.update(hostIPC=True), "host namespaces"),
    (lambda p: p["volumes"].append({"name": "h", "hostPath": {"path": "/"}}), "volume types"),
    (lambda p: p["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 80}]), "host ports"),
    (lambda p: p["containers"][0]["securityContext"].update(privileged=True), "privileged"),
    (lambda p: p["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"), "privilege escalation"),
    (lambda p: p["securityContext"].pop("runAsNonRoot"), "runAsNonRoot"),
    (lambda p: p["containers"][0]["securityContext"].update(runAsUser=0), "runAsUser"),
    (lambda p: p["securityContext"].pop("seccompProfile"), "seccomp"),
    (lambda p: p["containers"][0]["securityContext"]["capabilities"].update(drop=[]), "capabilities"),
    (lambda p: p["containers"][0]["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]), "capabilities"),
    (lambda p: p["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]), "sysctl"),
    (lambda p: p.update(initContainers=[{"name": "i"}]), "privilege escalation"),
])
def test_the_checker_refuses_each_control(change, control):
    assert restricted_violations(GOOD) == []
    assert any(p.startswith(control) for p in restricted_violations(_broken(change)))


def test_net_bind_service_is_the_one_capability_allowed():
    pod = _broken(lambda p: p["containers"][0]["securityContext"]["capabilities"].update(add=["NET_BIND_SERVICE"]))
    assert restricted_violations(pod) == []


# --- every pod of every child, for several specs ------------------------------------------------

OWNER = Owner(name="search", namespace="team", uid="uid-1")
BASE = {"image": "backscroll:1", "database": {"secretRef": {"name": "db"}}}
IN_CLUSTER = {**BASE, "embeddings": {"model": "e5", "dimensions": 384}}
SPECS = {
    "lexical": BASE,
    "in-cluster": IN_CLUSTER,
    "in-cluster, cached and mirrored": {**BASE, "embeddings": {"model": "e5", "dimensions": 384, "server": {
        "replicas": 1, "modelCache": {"claimName": "weights"},
        "modelSource": {"mirrorUrl": "https://hf.example", "tokenSecretRef": {"name": "hf", "key": "token"}}}}},
    "in-cluster, a pre-populated volume": {**BASE, "embeddings": {"model": "e5", "dimensions": 384, "server": {
        "modelSource": {"volume": {"claimName": "weights"}}}}},
    "external": {**BASE, "embeddings": {"model": "m", "dimensions": 256, "external": {"url": "https://e.example/v1"}}},
    "scheduled": {**IN_CLUSTER, "pod": {"imagePullSecrets": ["regcred"], "tolerations": [{"operator": "Exists"}]},
                  "api": {"autoscaling": {}}},
}


def _pods(manifest: dict | None) -> list[dict]:
    if manifest is None or manifest["kind"] not in ("Deployment", "Job"):
        return []
    return [manifest["spec"]["template"]["spec"]]


def _every_pod(spec, plan) -> dict[str, dict]:
    emb = spec.embeddings
    manifests = [m for _, _, m in builders.desired(OWNER, spec, plan)]
    manifests += [builders.migration_job(OWNER, spec), builders.register_job(OWNER, spec, "secret-uid"),
                  builders.purge_job(OWNER, spec), builders.prune_job(OWNER, spec, "old-model")]
    if emb is not None:
        manifests += [builders.backfill_job(OWNER, spec, emb), builders.catchup_job(OWNER, spec, emb),
                      builders.embeddings_deployment(OWNER, spec, emb)]
    return {f"{m['kind']}/{m['metadata']['name']}": pod for m in manifests if m for pod in _pods(m)}


@pytest.mark.parametrize("body", SPECS.values(), ids=SPECS.keys())
def test_every_pod_the_operator_creates_is_restricted(body):
    spec = parse(body)
    plan = rollout.plan(spec, Observed(migrated=True, backfilled=frozenset([spec.embeddings.model] if spec.embeddings
                                                                            else [])))
    pods = _every_pod(spec, plan)
    kinds = {name.split("/")[0] for name in pods}
    assert kinds == {"Deployment", "Job"}
    assert {name: restricted_violations(pod) for name, pod in pods.items()} == {name: [] for name in pods}


def test_a_rollout_with_two_servers_is_restricted():
    old = parse(IN_CLUSTER).embeddings
    spec = parse({**BASE, "embeddings": {"model": "arctic-l", "dimensions": 256}})
    plan = rollout.plan(spec, Observed(migrated=True, api_exists=True, api_image="backscroll:1", api_embeddings=old,
                                       worker_exists=True, worker_embeddings=old, worker_rolled_out=True,
                                       backfilled=frozenset({"e5"}), coverage={"e5": 1.0}))
    servers = [m for r, _, m in builders.desired(OWNER, spec, plan)
               if m and m["kind"] == "Deployment" and m["metadata"]["labels"]["app.kubernetes.io/component"] == "embeddings"]
    assert len(servers) == 2, "the old model's server serves queries while the new one's embeds the backfill"
    pods = _every_pod(spec, plan)
    assert {name: restricted_violations(pod) for name, pod in pods.items()} == {name: [] for name in pods}
