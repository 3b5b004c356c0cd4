CREATE TABLE "known_clients" (
	"account" text NOT NULL,
	"client" text NOT NULL,
	"seen_at" bigint NOT NULL,
	CONSTRAINT "known_clients_account_client_pk" PRIMARY KEY("account","client")
);
--> statement-breakpoint
CREATE TABLE "login_backoff" (
	"kind" text NOT NULL,
	"account" text NOT NULL,
	"window_start" bigint NOT NULL,
	"failures" bigint NOT NULL,
	"delay_ms" bigint NOT NULL,
	"next_at" bigint NOT NULL,
	CONSTRAINT "login_backoff_kind_account_pk" PRIMARY KEY("kind","account")
);
--> statement-breakpoint
ALTER TABLE "email_codes" ADD COLUMN "client" text;--> statement-breakpoint
ALTER TABLE "refresh_families" ADD COLUMN "last_used_at" bigint;--> statement-breakpoint
CREATE INDEX "login_backoff_window_idx" ON "login_backoff" USING btree ("window_start");--> statement-breakpoint
CREATE INDEX "refresh_families_revoked_idx" ON "refresh_families" USING btree ("revoked_at");