CREATE TABLE "stored_totals" (
	"did" text PRIMARY KEY NOT NULL,
	"bytes" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
-- Written by hand (drizzle-kit cannot express triggers): `stored_totals` follows `files` in the
-- statement that changes a file row, so every path that records, replaces or deletes a file —
-- uploads, the S3 API, a gateway of the previous version sharing this database (D16) — keeps it
-- exact without knowing it exists. Relative updates only: concurrent writers add, never overwrite.
-- First, the lock that stops every other writer of `files` (a running gateway of the previous
-- version) until this migration commits, so no row changes between the count below and the
-- trigger; reads go on. Writers already in a transaction finish first.
LOCK TABLE "files" IN SHARE ROW EXCLUSIVE MODE;
--> statement-breakpoint
CREATE FUNCTION stored_totals_follow_files() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    UPDATE stored_totals SET bytes = bytes - OLD.size WHERE did = OLD.did;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO stored_totals (did, bytes) VALUES (NEW.did, NEW.size)
      ON CONFLICT (did) DO UPDATE SET bytes = stored_totals.bytes + excluded.bytes;
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
-- Nothing updates a file's size or owner today; if something does, the total follows.
CREATE TRIGGER files_stored_totals AFTER INSERT OR DELETE OR UPDATE OF did, size ON "files"
  FOR EACH ROW EXECUTE FUNCTION stored_totals_follow_files();
--> statement-breakpoint
-- The files already there (the lock above holds until COMMIT).
INSERT INTO "stored_totals" ("did", "bytes") SELECT "did", SUM("size") FROM "files" GROUP BY "did";
