ALTER TABLE `files` ADD `metadata` text;--> statement-breakpoint
ALTER TABLE `s3_parts` ADD `copied` integer;--> statement-breakpoint
ALTER TABLE `s3_uploads` ADD `metadata` text;