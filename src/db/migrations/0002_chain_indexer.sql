CREATE TABLE `chain_blocks` (
	`name` text NOT NULL,
	`number` integer NOT NULL,
	`hash` text NOT NULL,
	PRIMARY KEY(`name`, `number`)
);
--> statement-breakpoint
CREATE TABLE `chain_cursors` (
	`name` text PRIMARY KEY NOT NULL,
	`block` integer NOT NULL,
	`hash` text
);
