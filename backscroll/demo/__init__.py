"""`backscroll demo` (what `make run` runs): a realistic corpus, demo tokens, the API, and what to try.

The corpus is generated from templates with a seeded random generator, so every run writes the
same conversations with the same external ids, and it goes through the real ingest code
(`ingest.import_line`): the triggers, the search sidecar and the audience defaults all run as
they do for a connector. Only timestamps follow the clock (the last ~90 days before the first
load). A second run finds the corpus by its external ids and reuses it; loading it again anyway
(`force=True`) creates nothing, because ingestion is idempotent on external ids.

Three workspaces:
- grand-hotel: a hotel in Lisbon; a `concierge` agent (guests on the website, staff on Slack)
  and an `events` agent (clients by email, staff on Slack).
- acme: a software company; a `support` agent (customers in the help widget) and an `sre`
  agent (engineers on Slack: DMs, incident rooms, the #ops channel).
- northwind: a logistics company; a `dispatch` agent (planners on Slack, drivers by SMS).

Memorable conversations to find again: the Rose Room dinner, the room 412 double booking, a
French guest's table and airport transfer, Acme's orders-db migration, incident INC-482913, a
colleague's private DM about a surprise party, and a reply still being streamed (which search
must not find until it is finished).
"""
