CREATE TABLE "age_escrows" (
	"owner" text NOT NULL,
	"mid" text NOT NULL,
	"key_id" text NOT NULL,
	"header" text NOT NULL,
	"updated_at" bigint NOT NULL,
	CONSTRAINT "age_escrows_owner_mid_pk" PRIMARY KEY("owner","mid")
);
