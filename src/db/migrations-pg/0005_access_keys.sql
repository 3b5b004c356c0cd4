CREATE TABLE "access_keys" (
	"id" text PRIMARY KEY NOT NULL,
	"access_key_id" text NOT NULL,
	"did" text NOT NULL,
	"signer" text NOT NULL,
	"access" text NOT NULL,
	"bucket" text NOT NULL,
	"secret_enc" text NOT NULL,
	"expires_at" bigint,
	"created_at" bigint NOT NULL,
	"revoked_at" bigint,
	CONSTRAINT "access_keys_access_key_id_unique" UNIQUE("access_key_id")
);
--> statement-breakpoint
CREATE INDEX "access_keys_did" ON "access_keys" USING btree ("did","created_at");