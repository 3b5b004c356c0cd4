CREATE TABLE `purchases` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`account` text NOT NULL,
	`kind` text NOT NULL,
	`idempotency_key` text NOT NULL,
	`bytes` integer NOT NULL,
	`status` text NOT NULL,
	`tx` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `purchases_key` ON `purchases` (`account`,`kind`,`idempotency_key`);--> statement-breakpoint
CREATE TABLE `quota_reservations` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`account` text NOT NULL,
	`kind` text NOT NULL,
	`bytes` integer NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `quota_reservations_account` ON `quota_reservations` (`account`,`kind`);--> statement-breakpoint
CREATE TABLE `traffic_usage` (
	`account` text NOT NULL,
	`period_start` integer NOT NULL,
	`bytes` integer NOT NULL,
	PRIMARY KEY(`account`, `period_start`)
);
