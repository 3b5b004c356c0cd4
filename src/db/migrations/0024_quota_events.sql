CREATE TABLE `quota_events` (
	`block` integer NOT NULL,
	`log_index` integer NOT NULL,
	`tx` text NOT NULL,
	`kind` text NOT NULL,
	`account` text NOT NULL,
	`pool` text NOT NULL,
	`bytes` integer NOT NULL,
	`cost` text NOT NULL,
	`at` integer NOT NULL,
	PRIMARY KEY(`block`, `log_index`)
);
--> statement-breakpoint
CREATE INDEX `quota_events_account` ON `quota_events` (`account`,`at`);