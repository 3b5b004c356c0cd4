CREATE TABLE `buckets` (
	`did` text PRIMARY KEY NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `did_logins` (
	`did` text PRIMARY KEY NOT NULL,
	`last_timestamp` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `files` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`did` text NOT NULL,
	`backend` text NOT NULL,
	`name` text NOT NULL,
	`cid` text NOT NULL,
	`size` integer NOT NULL,
	`encryption` text DEFAULT '' NOT NULL,
	`mod_time` integer NOT NULL,
	FOREIGN KEY (`did`) REFERENCES `buckets`(`did`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `files_name` ON `files` (`did`,`backend`,`name`);--> statement-breakpoint
CREATE INDEX `files_cid` ON `files` (`backend`,`cid`,`did`);--> statement-breakpoint
CREATE TABLE `session_requests` (
	`did` text NOT NULL,
	`token` text NOT NULL,
	`request_id` integer NOT NULL,
	PRIMARY KEY(`did`, `token`, `request_id`)
);
--> statement-breakpoint
CREATE TABLE `storage_sessions` (
	`did` text NOT NULL,
	`token` text NOT NULL,
	`timestamp` integer NOT NULL,
	`highest_request` integer DEFAULT 0 NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`did`, `token`)
);
--> statement-breakpoint
CREATE INDEX `storage_sessions_latest` ON `storage_sessions` (`did`,`timestamp`);--> statement-breakpoint
CREATE TABLE `voucher_counters` (
	`payer` text PRIMARY KEY NOT NULL,
	`used` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE `vouchers_used` (
	`payer` text NOT NULL,
	`size` integer NOT NULL,
	`base` integer NOT NULL,
	`used_at` integer NOT NULL,
	PRIMARY KEY(`payer`, `size`)
);
