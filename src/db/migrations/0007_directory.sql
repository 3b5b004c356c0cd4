CREATE TABLE `directory_entries` (
	`id` integer PRIMARY KEY NOT NULL,
	`owner` text NOT NULL,
	`mid` text NOT NULL,
	`did` text NOT NULL,
	`cid` text,
	`name` text NOT NULL,
	`size` text NOT NULL,
	`price` text NOT NULL,
	`public` integer NOT NULL,
	`keywords` text NOT NULL,
	`block` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `directory_entries_key` ON `directory_entries` (`owner`,`mid`);--> statement-breakpoint
CREATE INDEX `directory_entries_cid` ON `directory_entries` (`cid`,`did`);--> statement-breakpoint
CREATE TABLE `directory_events` (
	`block` integer NOT NULL,
	`log_index` integer NOT NULL,
	`tx` text NOT NULL,
	`kind` text NOT NULL,
	`owner` text NOT NULL,
	`mid` text NOT NULL,
	`data` text NOT NULL,
	PRIMARY KEY(`block`, `log_index`)
);
--> statement-breakpoint
CREATE INDEX `directory_events_key` ON `directory_events` (`owner`,`mid`,`block`,`log_index`);--> statement-breakpoint
CREATE TABLE `directory_grants` (
	`owner` text NOT NULL,
	`mid` text NOT NULL,
	`reader` text NOT NULL,
	`block` integer NOT NULL,
	PRIMARY KEY(`owner`, `mid`, `reader`)
);
--> statement-breakpoint
CREATE TABLE `directory_purchases` (
	`owner` text NOT NULL,
	`mid` text NOT NULL,
	`reader` text NOT NULL,
	`paid` text NOT NULL,
	`block` integer NOT NULL,
	`tx` text NOT NULL,
	PRIMARY KEY(`owner`, `mid`, `reader`)
);
