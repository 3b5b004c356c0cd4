CREATE TABLE `session_grant_nonces` (
	`nonce` text PRIMARY KEY NOT NULL,
	`did` text NOT NULL,
	`issued_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	`used_at` integer
);
--> statement-breakpoint
CREATE INDEX `session_grant_nonces_did` ON `session_grant_nonces` (`did`);--> statement-breakpoint
CREATE INDEX `session_grant_nonces_expires` ON `session_grant_nonces` (`expires_at`);--> statement-breakpoint
ALTER TABLE `age_identities` ADD `salt` text;--> statement-breakpoint
ALTER TABLE `session_grants` ADD `abilities` text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE `session_grants` ADD `origin` text;