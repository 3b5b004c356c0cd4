CREATE TABLE `dfs_chunk_checks` (
	`hash` text PRIMARY KEY NOT NULL,
	`file` text NOT NULL,
	`state` text NOT NULL,
	`checked_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `dfs_chunk_checks_checked_at` ON `dfs_chunk_checks` (`checked_at`);