-- The bytes of a purchase or grant as decimal text: the event's uint64 passes SQLite's integers
-- (a 9 EiB grant). Integers are copied exactly; a value stored as REAL, rounded when it was
-- written, becomes integer text (still rounded: the chain's event has the exact amount).
PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_quota_events` (
	`block` integer NOT NULL,
	`log_index` integer NOT NULL,
	`tx` text NOT NULL,
	`kind` text NOT NULL,
	`account` text NOT NULL,
	`pool` text NOT NULL,
	`bytes` text NOT NULL,
	`cost` text NOT NULL,
	`at` integer NOT NULL,
	PRIMARY KEY(`block`, `log_index`)
);
--> statement-breakpoint
INSERT INTO `__new_quota_events`("block", "log_index", "tx", "kind", "account", "pool", "bytes", "cost", "at") SELECT "block", "log_index", "tx", "kind", "account", "pool", CASE typeof("bytes") WHEN 'integer' THEN CAST("bytes" AS TEXT) ELSE printf('%.0f', "bytes") END, "cost", "at" FROM `quota_events`;--> statement-breakpoint
DROP TABLE `quota_events`;--> statement-breakpoint
ALTER TABLE `__new_quota_events` RENAME TO `quota_events`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE INDEX `quota_events_account` ON `quota_events` (`account`,`at`);