ALTER TABLE `files` ADD `checksum` text;--> statement-breakpoint
ALTER TABLE `files` ADD `parts` text;--> statement-breakpoint
ALTER TABLE `s3_parts` ADD `checksum` text;--> statement-breakpoint
ALTER TABLE `s3_uploads` ADD `checksum_algorithm` text;--> statement-breakpoint
ALTER TABLE `s3_uploads` ADD `checksum_type` text;