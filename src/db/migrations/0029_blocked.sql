CREATE TABLE `blocked` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`key` text NOT NULL,
	`rule` text NOT NULL,
	`reason` text NOT NULL,
	`blocked_at` integer NOT NULL,
	`lifted_at` integer
);
--> statement-breakpoint
CREATE INDEX `blocked_key` ON `blocked` (`key`);