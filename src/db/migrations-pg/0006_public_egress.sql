CREATE TABLE "public_egress" (
	"owner" text NOT NULL,
	"day" bigint NOT NULL,
	"bytes" bigint NOT NULL,
	CONSTRAINT "public_egress_owner_day_pk" PRIMARY KEY("owner","day")
);
