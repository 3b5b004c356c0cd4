CREATE TABLE "pin_requests" (
	"id" text PRIMARY KEY NOT NULL,
	"did" text NOT NULL,
	"cid" text NOT NULL,
	"root" text NOT NULL,
	"name" text,
	"origins" text NOT NULL,
	"meta" text NOT NULL,
	"status" text NOT NULL,
	"details" text,
	"created_at" bigint NOT NULL,
	"updated_at" bigint NOT NULL,
	"lease_holder" text,
	"lease_until" bigint
);
--> statement-breakpoint
CREATE INDEX "pin_requests_did" ON "pin_requests" USING btree ("did","created_at");--> statement-breakpoint
CREATE INDEX "pin_requests_work" ON "pin_requests" USING btree ("status","lease_until");