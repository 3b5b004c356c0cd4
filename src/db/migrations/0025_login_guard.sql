CREATE TABLE `known_clients` (
	`account` text NOT NULL,
	`client` text NOT NULL,
	`seen_at` integer NOT NULL,
	PRIMARY KEY(`account`, `client`)
);
--> statement-breakpoint
CREATE TABLE `login_backoff` (
	`kind` text NOT NULL,
	`account` text NOT NULL,
	`window_start` integer NOT NULL,
	`failures` integer NOT NULL,
	`delay_ms` integer NOT NULL,
	`next_at` integer NOT NULL,
	PRIMARY KEY(`kind`, `account`)
);
--> statement-breakpoint
CREATE INDEX `login_backoff_window_idx` ON `login_backoff` (`window_start`);--> statement-breakpoint
ALTER TABLE `email_codes` ADD `client` text;--> statement-breakpoint
ALTER TABLE `refresh_families` ADD `last_used_at` integer;--> statement-breakpoint
CREATE INDEX `refresh_families_revoked_idx` ON `refresh_families` (`revoked_at`);