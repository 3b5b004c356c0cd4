CREATE TABLE `ipfs_blocks` (
	`key` text PRIMARY KEY NOT NULL,
	`size` integer NOT NULL,
	`refs` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `ipfs_object_blocks` (
	`cid` text NOT NULL,
	`key` text NOT NULL,
	PRIMARY KEY(`cid`, `key`)
);
--> statement-breakpoint
CREATE INDEX `ipfs_object_blocks_key` ON `ipfs_object_blocks` (`key`);