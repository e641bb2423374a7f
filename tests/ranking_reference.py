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


def bm25_reference(conn, agents: list[int], lexemes: set[str], rank: Ranking = Ranking()) -> dict[int, float]:
    """BM25 of every document of `agents` for `lexemes`, keyed by message id."""
    docs: dict[int, dict[str, list[str]]] = defaultdict(dict)
    for r in conn.execute(DOCUMENTS, (list(agents),)).fetchall():
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
