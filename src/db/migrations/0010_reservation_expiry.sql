ALTER TABLE `quota_reservations` ADD `gateway` text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE `quota_reservations` ADD `expires_at` integer DEFAULT 0 NOT NULL;