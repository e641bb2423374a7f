-- What people write is stored composed (Unicode NFC, issue 20): `é` typed as one character or as
-- `e` and a combining accent is one word in a document and in a query. The API and the importer
-- compose bodies, titles and names as they arrive (vocabulary.Prose), a streamed append composes
-- the whole body it joins (an accent may arrive in the chunk after its letter), and queries are
-- composed before they are parsed. This brings what was stored before in line: only rows that are
-- not composed already are touched, so their documents, statistics and embedding jobs follow
-- through the usual update triggers.

update messages set body = normalize(body, NFC) where body is not nfc normalized;
update conversations set title = normalize(title, NFC) where title is not nfc normalized;
update actors set display_name = normalize(display_name, NFC) where display_name is not nfc normalized;
update agents set name = normalize(name, NFC) where name is not nfc normalized;
update memories set body = normalize(body, NFC) where body is not nfc normalized;
