"""Reading the history: the sessions sidebar's search and recent list (`sessions`), agents'
search_history (`history`) and turns (`turns`), the hybrid sequence both searches share
(`hybrid`), ranking (`ranking`), cursors (`cursor`), SQL composition (`sqltext`) and the
workspace text-search rebuild (`maintenance`).

The tables derived for search are written by this package alone (any module of it; the database's
triggers keep most of them): tests/unit/test_write_owners.py holds every other module to it."""

WRITES = ("message_search", "search_audiences", "search_term_deltas", "search_doc_deltas", "search_term_stats",
          "search_doc_stats", "search_audience_term_stats", "search_audience_doc_stats", "search_audit", "turns",
          "turn_evidence")
