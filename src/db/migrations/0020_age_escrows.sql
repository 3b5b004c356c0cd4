CREATE TABLE `age_escrows` (
	`owner` text NOT NULL,
	`mid` text NOT NULL,
	`key_id` text NOT NULL,
	`header` text NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`owner`, `mid`)
);
