"""BM25 written again, in Python, from the sidecar's raw documents: the reference the SQL
ranking (backscroll.ranking) is checked against. Document frequencies, N and the average length
are recounted here from the documents themselves, independently of the statistics the triggers
keep, so a drifting statistic fails the comparison too."""

from __future__ import annotations

import math
from collections import defaultdict

from backscroll.search.ranking import Ranking

DOCUMENTS = """
select s.message_id, u.lexeme, u.weights
  from message_search s left join lateral unnest(s.tsv) u on true
 where s.agent_id = any(%s)
"""


def bm25_reference(conn, agents: list[int], lexemes: set[str], rank: Ranking = Ranking(),
                   counted: set[int] | None = None) -> dict[int, float]:
    """BM25 of every document of `agents` for `lexemes`, keyed by message id. `counted`: only
    those documents count (the caller's scope: for search_history, the messages whose audience
    its destination may receive, issue 29); by default every document of `agents`."""
    docs: dict[int, dict[str, list[str]]] = defaultdict(dict)
    for r in conn.execute(DOCUMENTS, (list(agents),)).fetchall():
        if counted is not None and r["message_id"] not in counted:
            continue
        docs[r["message_id"]]
        if r["lexeme"] is not None:
            docs[r["message_id"]][r["lexeme"]] = list(r["weights"])
    n = len(docs)
    length = {m: sum(w.count("D") for w in d.values()) for m, d in docs.items()}
    avgdl = max(sum(length.values()) / n, 1.0) if n else 1.0
    df = {lx: sum(1 for d in docs.values() if lx in d) for lx in lexemes}
    scores = {}
    for m, d in docs.items():
        score = 0.0
        for lx in lexemes:
            if lx not in d:
                continue
            tf = d[lx].count("D") + d[lx].count("C") + d[lx].count("B") + rank.speaker_weight * d[lx].count("A")
            idf = math.log(1 + (n - df[lx] + 0.5) / (df[lx] + 0.5))
            score += idf * tf * (rank.k1 + 1) / (tf + rank.k1 * (1 - rank.b + rank.b * length[m] / avgdl))
        scores[m] = score
    return scores


CONVERSATION_OF = "select message_id, conversation_id from message_search where agent_id = any(%s)"


def session_reference(conn, agents: list[int], lexemes: set[str], rank: Ranking = Ranking()) -> dict[int, float]:
    """A conversation's content score for session search, keyed by conversation id (issue 18):
    the BM25 of its best matching message, plus `coverage_weight` times the idf of each query
    lexeme that any of its messages holds. Every matching message is a candidate here (the pool
    is not reached in the worlds these references are used on)."""
    docs: dict[int, set[str]] = defaultdict(set)
    for r in conn.execute(DOCUMENTS, (list(agents),)).fetchall():
        docs[r["message_id"]]
        if r["lexeme"] is not None:
            docs[r["message_id"]].add(r["lexeme"])
    n = len(docs)
    idf = {lx: math.log(1 + (n - df + 0.5) / (df + 0.5))
           for lx, df in ((lx, sum(1 for d in docs.values() if lx in d)) for lx in lexemes)}
    bm25 = bm25_reference(conn, agents, lexemes, rank)
    conversation = {r["message_id"]: r["conversation_id"] for r in conn.execute(CONVERSATION_OF, (list(agents),))}
    best: dict[int, float] = {}
    held: dict[int, set[str]] = defaultdict(set)
    for m, d in docs.items():
        matched = d & lexemes
        if not matched:
            continue
        c = conversation[m]
        best[c] = max(best.get(c, 0.0), bm25[m])
        held[c] |= matched
    return {c: best[c] + rank.coverage_weight * sum(idf[lx] for lx in held[c]) for c in best}
