CREATE TABLE "session_grant_nonces" (
	"nonce" text PRIMARY KEY NOT NULL,
	"did" text NOT NULL,
	"issued_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL,
	"used_at" bigint
);
--> statement-breakpoint
ALTER TABLE "age_identities" ADD COLUMN "salt" text;--> statement-breakpoint
ALTER TABLE "session_grants" ADD COLUMN "abilities" text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE "session_grants" ADD COLUMN "origin" text;--> statement-breakpoint
CREATE INDEX "session_grant_nonces_did" ON "session_grant_nonces" USING btree ("did");--> statement-breakpoint
CREATE INDEX "session_grant_nonces_expires" ON "session_grant_nonces" USING btree ("expires_at");