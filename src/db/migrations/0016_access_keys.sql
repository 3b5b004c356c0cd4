CREATE TABLE `access_keys` (
	`id` text PRIMARY KEY NOT NULL,
	`access_key_id` text NOT NULL,
	`did` text NOT NULL,
	`signer` text NOT NULL,
	`access` text NOT NULL,
	`bucket` text NOT NULL,
	`secret_enc` text NOT NULL,
	`expires_at` integer,
	`created_at` integer NOT NULL,
	`revoked_at` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `access_keys_access_key_id_unique` ON `access_keys` (`access_key_id`);--> statement-breakpoint
CREATE INDEX `access_keys_did` ON `access_keys` (`did`,`created_at`);