CREATE TABLE "quota_events" (
	"block" bigint NOT NULL,
	"log_index" bigint NOT NULL,
	"tx" text NOT NULL,
	"kind" text NOT NULL,
	"account" text NOT NULL,
	"pool" text NOT NULL,
	"bytes" bigint NOT NULL,
	"cost" text NOT NULL,
	"at" bigint NOT NULL,
	CONSTRAINT "quota_events_block_log_index_pk" PRIMARY KEY("block","log_index")
);
--> statement-breakpoint
CREATE INDEX "quota_events_account" ON "quota_events" USING btree ("account","at");