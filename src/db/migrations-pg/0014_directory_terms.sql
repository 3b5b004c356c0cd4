CREATE TABLE "directory_terms" (
	"term" text COLLATE "C" PRIMARY KEY NOT NULL,
	"docs" bigint DEFAULT 0 NOT NULL,
	"name_docs" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
-- Written by hand (drizzle-kit cannot express triggers): `directory_terms` follows the search
-- documents of `directory_entries` in the statement that changes an entry, so the indexer of this
-- version and of the previous one (D16: both may share this database) keep it exact without
-- knowing it exists. `unnest(tsvector)` gives each lexeme of a document once, with the weights
-- it has there (A: the name). Relative updates only; lexemes in order, so two writers take the
-- rows' locks in the same order. A term whose count falls to 0 stays, counting 0.
-- First, the lock that stops every other writer of `directory_entries` (a running gateway of the
-- previous version) until this migration commits, so no entry changes between the count below
-- and the trigger; reads go on. Writers already in a transaction finish first.
LOCK TABLE "directory_entries" IN SHARE ROW EXCLUSIVE MODE;
--> statement-breakpoint
CREATE FUNCTION directory_terms_follow_entries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    UPDATE directory_terms t SET docs = t.docs - 1, name_docs = t.name_docs - (CASE WHEN 'A' = ANY (l.weights) THEN 1 ELSE 0 END)
      FROM unnest(OLD.search) AS l WHERE t.term = l.lexeme;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO directory_terms (term, docs, name_docs)
      SELECT l.lexeme, 1, CASE WHEN 'A' = ANY (l.weights) THEN 1 ELSE 0 END FROM unnest(NEW.search) AS l ORDER BY l.lexeme
      ON CONFLICT (term) DO UPDATE SET docs = directory_terms.docs + 1, name_docs = directory_terms.name_docs + excluded.name_docs;
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
-- `search` is generated from these two columns, so it changes only with them.
CREATE TRIGGER directory_entries_terms AFTER INSERT OR DELETE OR UPDATE OF name, keywords ON "directory_entries"
  FOR EACH ROW EXECUTE FUNCTION directory_terms_follow_entries();
--> statement-breakpoint
-- The entries already there (the lock above holds until COMMIT).
INSERT INTO "directory_terms" ("term", "docs", "name_docs")
  SELECT l.lexeme, count(*), count(*) FILTER (WHERE 'A' = ANY (l.weights)) FROM "directory_entries" e, unnest(e.search) AS l GROUP BY l.lexeme;
