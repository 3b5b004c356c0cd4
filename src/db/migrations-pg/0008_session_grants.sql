CREATE TABLE "session_grants" (
	"did" text NOT NULL,
	"key" text NOT NULL,
	"valid_until" bigint NOT NULL,
	"signer" text NOT NULL,
	"created_at" bigint NOT NULL,
	"revoked_at" bigint,
	CONSTRAINT "session_grants_did_key_pk" PRIMARY KEY("did","key")
);
--> statement-breakpoint
CREATE INDEX "session_grants_key" ON "session_grants" USING btree ("key");