CREATE TABLE `blob_pins` (
	`key` text NOT NULL,
	`holder` text NOT NULL,
	`expires_at` integer NOT NULL,
	PRIMARY KEY(`key`, `holder`)
);
--> statement-breakpoint
CREATE INDEX `blob_pins_holder` ON `blob_pins` (`holder`);--> statement-breakpoint
CREATE TABLE `blob_tombstones` (
	`key` text PRIMARY KEY NOT NULL,
	`holder` text NOT NULL,
	`expires_at` integer NOT NULL
);
