CREATE TABLE `leases` (
	`name` text PRIMARY KEY NOT NULL,
	`holder` text NOT NULL,
	`epoch` integer NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `rate_counters` (
	`key` text PRIMARY KEY NOT NULL,
	`window_start` integer NOT NULL,
	`count` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `operator_nonces` (
	`chain_id` integer NOT NULL,
	`address` text NOT NULL,
	`next` integer NOT NULL,
	PRIMARY KEY(`chain_id`, `address`)
);
