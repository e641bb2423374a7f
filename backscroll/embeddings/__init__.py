"""Vectors for semantic search: the embeddings gateway (`gateway`), registered models and their
indexes (`vectors`), the text embedded for a message (`document`), the outbox worker
(`worker`), the backfill of existing messages (`backfill`) and the bundled local server
(`local_embeddings`)."""
