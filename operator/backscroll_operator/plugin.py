"""`kubectl backscroll status NAME`: one screen on a SearchIndex, as `kubectl cnpg status` gives
for a CloudNativePG cluster. kubectl runs `kubectl-backscroll` from PATH (a console script of
this package); it reads with the operator's own client (kube.py) and the current kubeconfig.

Everything comes from the API server: the SearchIndex's status (mode, models and coverage, the
rollout and what it waits for, conditions), its Jobs (migrations, backfills), its pods and
Events. A backfill's rate is the Job's average (messages embedded since the Job started / its
age; the model's count starts at 0 for a new model), its ETA what is left at that rate; the
operator's `backscroll_searchindex_backfill_rate` gauge follows the recent rate instead.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime, timezone

import yaml

from .kube import RESOURCES, Kube, KubeError, NoCredentials, configuration

# Pods and Events are read here only; the operator itself never lists them.
RESOURCES.setdefault("pods", "/api/v1")

JOB_KINDS = ("migrate", "register", "backfill", "catchup", "prune", "purge")


def _age(stamp: str | None, now: datetime) -> str:
    if not stamp:
        return "-"
    seconds = int((now - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds())
    return _duration(max(seconds, 0))


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            rest = seconds % size // (size // 60 if unit != "m" else 1)
            return f"{seconds // size}{unit}{rest}{'h' if unit == 'd' else 'm' if unit == 'h' else 's'}" if rest \
                else f"{seconds // size}{unit}"
    return f"{seconds}s"


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return [indent + "   ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]


def _job_state(job: dict) -> str:
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True" and condition["type"] in ("Complete", "SuccessCriteriaMet"):
            return "Succeeded"
        if condition.get("status") == "True" and condition["type"] in ("Failed", "FailureTarget"):
            return f"Failed ({condition.get('reason') or 'failed'})"
    if (job.get("spec") or {}).get("suspend"):
        return "Suspended"
    return "Running" if status.get("active") else "Pending"


def _pod_state(pod: dict) -> tuple[str, str, int]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    total = len((pod.get("spec") or {}).get("containers") or []) or len(statuses)
    restarts = sum(s.get("restartCount", 0) for s in statuses)
    phase = (pod.get("status") or {}).get("phase") or "Unknown"
    for s in statuses:
        waiting = (s.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            phase = waiting["reason"]
    return f"{ready}/{total}", phase, restarts


def report(kube: Kube, namespace: str, name: str, now: datetime | None = None, events: int = 8) -> str:
    now = now or datetime.now(timezone.utc)
    index = kube.get("searchindexes", namespace, name)
    if index is None:
        raise LookupError(f'searchindex "{name}" not found in namespace "{namespace}"')
    meta, spec, status = index["metadata"], index.get("spec") or {}, index.get("status") or {}
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    ready = conditions.get("Ready") or {}
    out = [f"SearchIndex {namespace}/{name}   age {_age(meta.get('creationTimestamp'), now)}   "
           f"generation {meta.get('generation')} (observed {status.get('observedGeneration', '-')})"]
    if meta.get("deletionTimestamp"):
        out.append(f"Deleting:   since {_age(meta['deletionTimestamp'], now)}, finalizers {meta.get('finalizers') or []}")
    out.append(f"Mode:       {status.get('mode') or '-'}" + (f"   model {status['model']}" if status.get("model") else "")
               + (f"   coverage {status['coverage']}" if status.get("coverage") else ""))
    out.append(f"Ready:      {ready.get('status', 'Unknown')} ({ready.get('reason', '-')})"
               + (f": {ready['message']}" if ready.get("message") else ""))

    models = status.get("models") or []
    out.append("Models:" if models else "Models:     none (lexical search)" if not spec.get("embeddings")
               else "Models:     none reported yet")
    if models:
        rows = [["MODEL", "DIM", "ROLE", "EMBEDDED", "TOTAL", "COVERAGE"]]
        for m in models:
            coverage = m.get("coverage")
            rows.append([m.get("model"), m.get("dimensions", "-"), m.get("role", "-"), m.get("embedded", "-"),
                         m.get("total", "-"), "-" if coverage is None else f"{coverage * 100:.1f}%"])
        out += _table(rows)

    rollout = status.get("rollout") or {}
    if rollout:
        line = f"Rollout:    {rollout.get('phase', '-')}   serving {rollout.get('servingModel') or '-'}"
        if rollout.get("targetModel") and rollout.get("targetModel") != rollout.get("servingModel"):
            line += f" -> target {rollout['targetModel']}"
        out.append(line)
        out.append(f"Waits for:  {rollout.get('waitingFor') or 'nothing'}")

    jobs = kube.list("jobs", namespace, {"app.kubernetes.io/instance": name})
    by_kind: dict[str, list[dict]] = {}
    for job in jobs:
        kind = (job["metadata"].get("labels") or {}).get("app.kubernetes.io/component", "")
        by_kind.setdefault(kind, []).append(job)

    migration = status.get("migration") or {}
    migrate_jobs = sorted(by_kind.get("migrate", []), key=lambda j: j["metadata"].get("creationTimestamp", ""))
    applied = conditions.get("MigrationsApplied") or {}
    out.append(f"Migrations: {applied.get('status', 'Unknown')} ({applied.get('reason', '-')})"
               + (f", attempt {migration['attempt']}" if migration.get("attempt") else "")
               + (f", last error: {migration['lastError']}" if migration.get("lastError") else ""))
    if migrate_jobs:
        out += _table([["JOB", "STATE", "AGE"]] + [[j["metadata"]["name"], _job_state(j),
                                                    _age(j["metadata"].get("creationTimestamp"), now)]
                                                   for j in migrate_jobs])

    coverage_of = {m.get("model"): m for m in models}
    fills = [j for kind in ("backfill", "catchup") for j in by_kind.get(kind, [])]
    out.append("Backfills:" if fills else "Backfills:  none")
    if fills:
        rows = [["JOB", "MODEL", "STATE", "EMBEDDED", "RATE", "ETA"]]
        for job in sorted(fills, key=lambda j: j["metadata"].get("creationTimestamp", "")):
            model = _job_model(job)
            entry = coverage_of.get(model) or {}
            embedded, total = entry.get("embedded"), entry.get("total")
            state = _job_state(job)
            rate = eta = "-"
            started = (job.get("status") or {}).get("startTime")
            if state == "Running" and started and embedded is not None and total is not None:
                elapsed = (now - datetime.fromisoformat(started.replace("Z", "+00:00"))).total_seconds()
                if elapsed > 0 and embedded > 0:
                    per_s = embedded / elapsed
                    rate = f"{per_s:.1f}/s"
                    eta = _duration(max(total - embedded, 0) / per_s)
            done = "-" if embedded is None else f"{embedded}/{total}"
            rows.append([job["metadata"]["name"], model or "-", state, done, rate, eta])
        out += _table(rows)

    other = [j for kind in ("register", "prune", "purge") for j in by_kind.get(kind, [])]
    if other:
        out.append("Other jobs:")
        out += _table([["JOB", "STATE", "AGE"]] + [[j["metadata"]["name"], _job_state(j),
                                                    _age(j["metadata"].get("creationTimestamp"), now)] for j in other])

    pods = kube.list("pods", namespace, {"app.kubernetes.io/instance": name})
    running = [p for p in pods if not (p["metadata"].get("labels") or {}).get("job-name")
               and "batch.kubernetes.io/job-name" not in (p["metadata"].get("labels") or {})]
    out.append("Pods:" if running else "Pods:       none")
    if running:
        rows = [["NAME", "COMPONENT", "READY", "STATUS", "RESTARTS", "NODE", "AGE"]]
        for pod in sorted(running, key=lambda p: p["metadata"]["name"]):
            ready_count, phase, restarts = _pod_state(pod)
            rows.append([pod["metadata"]["name"], (pod["metadata"].get("labels") or {}).get(
                "app.kubernetes.io/component", "-"), ready_count, phase, restarts,
                (pod.get("spec") or {}).get("nodeName") or "-", _age(pod["metadata"].get("creationTimestamp"), now)])
        out += _table(rows)

    recent = sorted((e for e in kube.list("events", namespace, {})
                     if (e.get("involvedObject") or {}).get("name") == name
                     and (e.get("involvedObject") or {}).get("kind") == "SearchIndex"),
                    key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")[-events:]
    out.append(f"Events (last {events}):" if recent else "Events:     none")
    if recent:
        out += _table([["AGE", "TYPE", "REASON", "MESSAGE"]] + [
            [_age(e.get("lastTimestamp") or e.get("eventTime"), now), e.get("type", "-"), e.get("reason", "-"),
             (e.get("message") or "")[:100]] for e in recent])
    return "\n".join(out) + "\n"


def _job_model(job: dict) -> str | None:
    for container in (job.get("spec") or {}).get("template", {}).get("spec", {}).get("containers") or []:
        args = container.get("args") or []
        if "--model" in args:
            return args[args.index("--model") + 1]
    return None


def _namespace_from(kubeconfig: str | None) -> str:
    path = os.path.expanduser((kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config").split(os.pathsep)[0])
    try:
        config = yaml.safe_load(open(path)) or {}
    except OSError:
        return "default"
    current = config.get("current-context")
    for context in config.get("contexts") or []:
        if context.get("name") == current:
            return (context.get("context") or {}).get("namespace") or "default"
    return "default"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kubectl backscroll", description="Backscroll's kubectl plugin.")
    parser.add_argument("-n", "--namespace", help="the SearchIndex's namespace (default: the context's)")
    parser.add_argument("--kubeconfig", help="a kubeconfig other than $KUBECONFIG")
    commands = parser.add_subparsers(dest="command", required=True)
    status = commands.add_parser("status", help="one screen on a SearchIndex")
    status.add_argument("name", help="the SearchIndex")
    status.add_argument("-n", "--namespace", dest="status_namespace", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig
    namespace = args.status_namespace or args.namespace or _namespace_from(args.kubeconfig)
    try:
        kube = Kube(configuration())
        sys.stdout.write(report(kube, namespace, args.name))
    except (LookupError, NoCredentials) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KubeError as exc:
        print(f"error: the API server answered {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
