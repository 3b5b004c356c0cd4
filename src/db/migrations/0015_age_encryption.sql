CREATE TABLE `age_identities` (
	`account` text PRIMARY KEY NOT NULL,
	`wrapped` text NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `age_shares` (
	`owner` text NOT NULL,
	`mid` text NOT NULL,
	`reader` text NOT NULL,
	`header` text NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`owner`, `mid`, `reader`)
);
