"""Reading the history: the sessions sidebar's search and recent list (`sessions`), agents'
search_history (`history`) and turns (`turns`), the hybrid sequence both searches share
(`hybrid`), ranking (`ranking`), cursors (`cursor`), SQL composition (`sqltext`) and the
workspace text-search rebuild (`maintenance`)."""
