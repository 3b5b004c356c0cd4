-- Full-text index of the directory (D10), written by hand: drizzle-kit cannot generate virtual
-- tables. rowid = directory_entries.id; the indexer deletes and inserts rows in the same
-- transaction as the entry. Contentless (the text lives in directory_entries) with
-- contentless_delete so rows can be removed by rowid. unicode61 with remove_diacritics 2 folds
-- case and accents; the prefix indexes make the short prefix queries of a search box cheap.
CREATE VIRTUAL TABLE `directory_fts` USING fts5(
	name,
	keywords,
	content='',
	contentless_delete=1,
	tokenize='unicode61 remove_diacritics 2',
	prefix='2 3'
);
--> statement-breakpoint
-- A name match weighs twice a keyword match.
INSERT INTO `directory_fts` (`directory_fts`, `rank`) VALUES ('rank', 'bm25(2.0, 1.0)');
