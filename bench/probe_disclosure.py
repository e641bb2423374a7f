"""Randomized worlds against the HTTP API, as an attacker would try them: does search_history
ever hand a turn a message its destination's readers could not already read?

Each world is a fresh database with one workspace, one or two agents, two connector namespaces
with people whose external ids repeat across namespaces, and conversations of every audience
kind: public, workspace, DMs, private rooms, and external conversations (Slack Connect) whose
reader sets are equal, nested, overlapping or disjoint; some external conversations are stored
as before migration 0018 (no readers: sealed to themselves); identity links verified, waiting
for proof, or revoked. Everything goes in through the HTTP API with an ingest token; then turns
in random destinations search for random words with a runtime token. Every message returned
(hits and neighbours) is checked against a reference written from the disclosure specification
(seed 000, "Eligibility"; README.md, "`search_history` for agents", states its audience rule), not
from the product's SQL.

    .venv/bin/python bench/probe_disclosure.py --worlds 243          # ~2-3 minutes on 2 cores

Prints one table: worlds, searches, messages returned, and breaks per origin kind (the rule a
returned message broke). A non-zero break count exits 1.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backscroll.app import create_app  # noqa: E402
from backscroll.access.auth import TokenKind, create_token  # noqa: E402
from backscroll.config import Settings  # noqa: E402
from backscroll.store.db import connect, start_embedded  # noqa: E402
from backscroll.store.migrate import migrate  # noqa: E402

NAMESPACES = [("slack", "acme"), ("slack", "partners")]
PEOPLE = ["p1", "p2", "p3", "p4", "p5"]
VOCAB = ["pricing", "discount", "merger", "falcon", "deposit", "roadmap"]
AGENTS = ["bot", "scout"]


# ------------------------------------------------------------------------------------------------
# The reference: the disclosure specification (seed 000), in plain Python.

def reaches(origin: dict, dest: dict, linked: set[frozenset]) -> bool:
    """May text said to `origin` be disclosed into `dest`? Audiences are dicts with kind,
    namespace, readers, conversation (the one the row belongs to)."""
    kind, ns, readers = origin["kind"], origin["namespace"], set(origin["readers"])
    if kind == "public":
        return True
    if kind == "workspace":
        return dest["kind"] in ("workspace", "members") and dest["namespace"] == ns
    # members and external: "retrievable only in a conversation whose readers could already read it"
    if not readers:
        # stored with no readers: nobody is known to read it but its own conversation
        return origin["conversation"] == dest["conversation"] and dest["kind"] == kind and dest["namespace"] == ns
    d_readers = set(dest["readers"])
    if dest["kind"] == kind and dest["namespace"] == ns and d_readers and d_readers <= readers:
        return True
    # a verified person's single-reader DM follows them into their other DM with the agent
    if kind == "members" and len(readers) == 1 and dest["kind"] == "members" and len(d_readers) == 1:
        return frozenset({(ns, next(iter(readers))), (dest["namespace"], next(iter(d_readers)))}) in linked
    return False


# ------------------------------------------------------------------------------------------------

class World:
    def __init__(self, http, rng: random.Random, conn: psycopg.Connection, ws_id: int, external_readers: bool):
        self.http, self.rng, self.conn = http, rng, conn
        self.external_readers = external_readers
        self.ingest = {"Authorization": f"Bearer {create_token(conn, TokenKind.ingest, workspace_id=ws_id)[1]}"}
        self.runtime = {"Authorization": f"Bearer {create_token(conn, TokenKind.runtime, workspace_id=ws_id)[1]}"}
        self.convs: dict[int, dict] = {}       # id -> audience (+ agent, namespace)
        self.msgs: dict[int, dict] = {}        # id -> audience of the message
        self.linked: dict[str, set[frozenset]] = {a: set() for a in AGENTS}
        self.serial = 0

    def post(self, path: str, body: dict, refused_ok: bool = False) -> dict | None:
        r = self.http.post(path, headers=self.ingest, json=body)
        if refused_ok and r.status_code == 400:
            return None
        if r.status_code >= 300:
            raise SystemExit(f"{path}: {r.status_code} {r.text}")
        return r.json()

    def readers(self, shape: str, base: list[str]) -> list[str]:
        rng = self.rng
        if shape == "equal":
            return list(base)
        if shape == "nested":
            return base[:max(1, len(base) - 1)] if rng.random() < 0.5 else sorted(set(base) | {rng.choice(PEOPLE)})
        if shape == "overlapping":
            return sorted({base[0], *rng.sample([p for p in PEOPLE if p not in base], 1)})
        return sorted(rng.sample([p for p in PEOPLE if p not in base], min(2, len(PEOPLE) - len(base))))

    def conversation(self, agent: str, connector: tuple[str, str], kind: str, readers: list[str]) -> int:
        self.serial += 1
        if kind == "external" and not self.external_readers:
            readers = []   # as the ingest before 0018 required: nobody is known to read it
        audience = {"kind": kind, **({"readers": readers} if readers and kind in ("members", "external") else {})}
        cid = self.post("/v1/conversations", {"agent": agent, "connector": {"type": connector[0], "name": connector[1]},
                                              "external_id": f"C{self.serial}", "title": f"room {self.serial}",
                                              "audience": audience})["id"]
        ns = f"{connector[0]}:{connector[1]}"
        self.convs[cid] = {"kind": kind, "namespace": ns, "readers": list(readers) if kind in ("members", "external")
                           else [], "conversation": cid, "agent": agent}
        return cid

    def message(self, cid: int, speaker: str, words: list[str]) -> int:
        mid = self.post(f"/v1/conversations/{cid}/messages",
                        {"role": self.rng.choice(["user", "user", "assistant"]), "speaker": {"external_id": speaker},
                         "body": " ".join(words)})["id"]
        self.msgs[mid] = {**self.convs[cid]}
        return mid

    def seal(self, cid: int) -> None:
        """As stored before 0018: an external conversation (and what it holds) with no readers."""
        self.conn.execute("update conversations set audience_readers = '{}' where id = %s", (cid,))
        self.conn.execute("update messages set audience_readers = '{}' where conversation_id = %s", (cid,))
        self.convs[cid]["readers"] = []
        for m in self.msgs.values():
            if m["conversation"] == cid:
                m["readers"] = []


def build(world: World) -> None:
    rng = world.rng
    agents = AGENTS[:rng.randint(1, 2)]
    for connector in NAMESPACES:
        for agent in agents:
            base = sorted(rng.sample(PEOPLE, rng.randint(1, 3)))
            # Slack Connect: external conversations shared with different organisations.
            world.conversation(agent, connector, "external", base)
            for _ in range(rng.randint(1, 3)):
                shape = rng.choice(["equal", "nested", "overlapping", "disjoint"])
                world.conversation(agent, connector, rng.choice(["external", "external", "members"]),
                                   world.readers(shape, base))
            world.conversation(agent, connector, "members", [rng.choice(PEOPLE)])      # a DM
            world.conversation(agent, connector, rng.choice(["public", "workspace"]), [])
    for cid in list(world.convs):
        for _ in range(rng.randint(1, 4)):
            world.message(cid, rng.choice(PEOPLE), rng.sample(VOCAB, rng.randint(1, 3)))
    for cid, aud in world.convs.items():
        if aud["kind"] == "external" and rng.random() < 0.2:
            world.seal(cid)
    # Identity links between DM readers: verified, waiting for proof, or revoked.
    dms = [a for a in world.convs.values() if a["kind"] == "members" and len(a["readers"]) == 1]
    for _ in range(rng.randint(0, 3)):
        if len(dms) < 2:
            break
        x, y = rng.sample(dms, 2)
        a, b = (x["namespace"], x["readers"][0]), (y["namespace"], y["readers"][0])
        if a == b:
            continue
        agent = rng.choice(agents)
        state = rng.choice(["verified", "pending", "revoked"])
        body = {"agent": agent, "a": {"namespace": a[0], "external_id": a[1]},
                "b": {"namespace": b[0], "external_id": b[1]}}
        # Refused when a reader never spoke (no actor yet), or, before 0018, a link without proof.
        link = world.post("/v1/identity-links", {**body, **({"proof": "otp"} if state != "pending" else {})},
                          refused_ok=True)
        if link is None:
            continue
        if state == "revoked":
            world.post(f"/v1/identity-links/{link['id']}/revoke", {})
        elif state == "verified" or link.get("verified", True):
            world.linked[agent].add(frozenset({a, b}))


def probe(world: World, searches: int, breaks: Counter, returned: Counter) -> None:
    rng = world.rng
    for _ in range(searches):
        dest_id = rng.choice(list(world.convs))
        dest = world.convs[dest_id]
        requester = dest["readers"][0] if dest["readers"] else rng.choice(PEOPLE)
        asked = world.message(dest_id, requester, rng.sample(VOCAB, 2))
        r = world.http.post("/v1/turns", headers=world.runtime, json={
            "agent": dest["agent"], "conversation_id": dest_id, "requester": {"external_id": requester},
            "answering_message_id": asked})
        turn = r.json()["id"]
        r = world.http.post("/v1/tools/search_history", headers=world.runtime,
                            json={"turn_id": turn, "query": " ".join(rng.sample(VOCAB, rng.randint(1, 3))),
                                  "limit": 20})
        if r.status_code != 200:
            raise SystemExit(f"search_history: {r.status_code} {r.text}")
        for mid in r.json()["message_ids"]:
            origin = world.msgs[mid]
            returned[origin["kind"]] += 1
            if not reaches(origin, dest, world.linked[dest["agent"]]):
                label = origin["kind"] + (" (no readers)" if origin["kind"] in ("members", "external")
                                          and not origin["readers"] else "")
                breaks[label] += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", type=int, default=243)
    parser.add_argument("--searches", type=int, default=8, help="searches per world")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", type=Path, default=ROOT / "bench" / "out" / "probe-pg")
    parser.add_argument("--database-url", help="a server to use instead of the embedded one")
    parser.add_argument("--no-external-readers", action="store_true",
                        help="post external audiences without readers, as a release before migration 0018 "
                             "required (to measure that release: run this file from its checkout)")
    args = parser.parse_args()

    from fastapi.testclient import TestClient

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = args.database_url or start_embedded(args.data)
    template = psycopg.conninfo.make_conninfo(server, dbname="backscroll_probe_template")
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute("drop database if exists backscroll_probe_template with (force)")
        admin.execute("create database backscroll_probe_template")
    migrate(template)

    breaks: Counter = Counter()
    returned: Counter = Counter()
    started = time.monotonic()
    searches = 0
    for n in range(args.worlds):
        name = f"backscroll_probe_{n % 2}"
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"drop database if exists {name} with (force)")
            admin.execute(f"create database {name} template backscroll_probe_template")
        url = psycopg.conninfo.make_conninfo(server, dbname=name)
        with connect(url, autocommit=True) as conn, \
                TestClient(create_app(Settings().replace(database={"database_url": url}), url),
                           raise_server_exceptions=True) as http:
            ws_id = conn.execute("insert into workspaces (slug, name) values ('acme', 'Acme') returning id"
                                 ).fetchone()["id"]
            world = World(http, random.Random(args.seed * 1_000_003 + n), conn, ws_id,
                          external_readers=not args.no_external_readers)
            build(world)
            probe(world, args.searches, breaks, returned)
            searches += args.searches
        if (n + 1) % 25 == 0:
            print(f"  {n + 1}/{args.worlds} worlds, {sum(breaks.values())} breaks", file=sys.stderr, flush=True)
    elapsed = time.monotonic() - started

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nprobe_disclosure: {args.worlds} worlds, {searches} searches, seed {args.seed}, "
          f"{elapsed:.0f} s, load average {load}\n")
    print("| origin kind | messages returned | breaks |")
    print("|---|---:|---:|")
    kinds = sorted(set(returned) | {k.split(" ")[0] for k in breaks})
    for kind in kinds:
        print(f"| {kind} | {returned[kind]} | {breaks[kind] + breaks[kind + ' (no readers)']} |")
    print(f"| **all** | {sum(returned.values())} | {sum(breaks.values())} |")
    return 1 if breaks else 0


if __name__ == "__main__":
    sys.exit(main())
