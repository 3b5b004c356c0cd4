CREATE TABLE "dfs_chunk_checks" (
	"hash" text PRIMARY KEY NOT NULL,
	"file" text NOT NULL,
	"state" text NOT NULL,
	"checked_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE INDEX "dfs_chunk_checks_checked_at" ON "dfs_chunk_checks" USING btree ("checked_at");