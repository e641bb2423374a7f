-- backscroll: no-transaction
-- A token that reads GET /v1/status and nothing else: the operator polls status with it, so a
-- leaked operator credential discloses no conversation, changes no setting and mints no token.
-- Alone and outside a transaction: a value added to an enum cannot be used until it is
-- committed (0026 uses it), and before PostgreSQL 12 it could not be added inside one at all.
alter type token_kind add value if not exists 'status';
