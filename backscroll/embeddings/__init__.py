"""Vectors for semantic search: the embeddings gateway (`gateway`), registered models and their
indexes (`vectors`), the text embedded for a message (`document`), the outbox worker
(`worker`), the backfill of existing messages (`backfill`) and the bundled local server
(`local_embeddings`).

The tables of vectors and their upkeep are written by this package alone (any module of it; the
database's triggers keep the outbox and coverage deltas): tests/unit/test_write_owners.py."""

WRITES = ("embedding_models", "message_embeddings", "embedding_outbox", "embedding_usage", "embedding_backfills",
          "embedding_backfill_positions", "embedding_coverage_deltas", "embedding_coverage_stats",
          "embedding_audience_coverage_stats")
