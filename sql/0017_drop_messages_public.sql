-- backscroll: no-transaction
-- The index the public list read before 0014 (0011's), unused now; dropped without taking a
-- lock that searches would queue behind.
drop index concurrently if exists messages_public;
