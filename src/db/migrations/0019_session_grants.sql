CREATE TABLE `session_grants` (
	`did` text NOT NULL,
	`key` text NOT NULL,
	`valid_until` integer NOT NULL,
	`signer` text NOT NULL,
	`created_at` integer NOT NULL,
	`revoked_at` integer,
	PRIMARY KEY(`did`, `key`)
);
--> statement-breakpoint
CREATE INDEX `session_grants_key` ON `session_grants` (`key`);