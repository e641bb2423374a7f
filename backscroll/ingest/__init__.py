"""Writing the history: conversations and messages (`writes`, the one path the API and
`backscroll import` share), JSON-lines imports (`importer`), identity links (`links`) and
agent memories (`memories`)."""
