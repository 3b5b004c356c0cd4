CREATE TABLE "quota_accounts" (
	"account" text PRIMARY KEY NOT NULL
);
