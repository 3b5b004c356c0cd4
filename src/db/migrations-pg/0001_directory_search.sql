-- Directory search on PostgreSQL (D16), written by hand: drizzle-kit cannot express functions or
-- expression indexes. The SQLite side is FTS5 with unicode61 remove_diacritics 2 (migration 0008
-- there) over NFKC-normalised text; here the same folding is NFKC + unaccent + the `simple`
-- configuration (lower-case, no stemming, no stop words), names weighted A and keywords B so a
-- name match ranks above a keyword-only one. The index is on an expression, not a stored column,
-- so both dialects keep the same columns; queries must use the same expression to use it.
-- `unaccent` is a trusted extension: a database owner may create it, no superuser needed.
CREATE EXTENSION IF NOT EXISTS unaccent WITH SCHEMA public;
--> statement-breakpoint
-- unaccent() is STABLE (its dictionary could be changed), so it cannot appear in an index: this
-- wrapper names the dictionary explicitly and is declared IMMUTABLE. A standard-SQL body is bound
-- at creation, so the search_path of whoever calls it later does not matter.
CREATE FUNCTION stowage_fold(t text) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
  RETURN public.unaccent('public.unaccent'::regdictionary, normalize(t, NFKC));
--> statement-breakpoint
-- `keywords` is a JSON array of strings (text, D16): its words, space-separated, as the SQLite
-- side indexes them (directory/text.ts keywordText).
CREATE FUNCTION stowage_keyword_text(keywords text) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
  RETURN (SELECT coalesce(string_agg(k, ' '), '') FROM json_array_elements_text(keywords::json) AS k);
--> statement-breakpoint
CREATE FUNCTION directory_search_document(name text, keywords text) RETURNS tsvector
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN setweight(to_tsvector('simple'::regconfig, coalesce(stowage_fold(name), '')), 'A')
    || setweight(to_tsvector('simple'::regconfig, coalesce(stowage_fold(stowage_keyword_text(keywords)), '')), 'B');
--> statement-breakpoint
CREATE INDEX directory_entries_search ON directory_entries USING gin (directory_search_document(name, keywords));
