CREATE TABLE `s3_parts` (
	`upload_id` text NOT NULL,
	`part_number` integer NOT NULL,
	`cid` text NOT NULL,
	`size` integer NOT NULL,
	`md5` text NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`upload_id`, `part_number`)
);
--> statement-breakpoint
CREATE TABLE `s3_uploads` (
	`id` text PRIMARY KEY NOT NULL,
	`did` text NOT NULL,
	`backend` text NOT NULL,
	`name` text NOT NULL,
	`content_type` text,
	`reservation` integer,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `s3_uploads_did` ON `s3_uploads` (`did`,`backend`,`name`);--> statement-breakpoint
CREATE INDEX `s3_uploads_expiry` ON `s3_uploads` (`expires_at`);--> statement-breakpoint
ALTER TABLE `files` ADD `etag` text;