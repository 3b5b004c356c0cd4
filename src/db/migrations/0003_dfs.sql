CREATE TABLE `dfs_chunks` (
	`hash` text PRIMARY KEY NOT NULL,
	`size` integer NOT NULL,
	`refs` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `dfs_object_chunks` (
	`cid` text NOT NULL,
	`idx` integer NOT NULL,
	`hash` text NOT NULL,
	`size` integer NOT NULL,
	PRIMARY KEY(`cid`, `idx`),
	FOREIGN KEY (`cid`) REFERENCES `dfs_objects`(`cid`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`hash`) REFERENCES `dfs_chunks`(`hash`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `dfs_object_chunks_hash` ON `dfs_object_chunks` (`hash`);--> statement-breakpoint
CREATE TABLE `dfs_objects` (
	`cid` text PRIMARY KEY NOT NULL,
	`size` integer NOT NULL,
	`chunks` integer NOT NULL,
	`refs` integer NOT NULL,
	`created_at` integer NOT NULL
);
