CREATE TABLE `public_egress` (
	`owner` text NOT NULL,
	`day` integer NOT NULL,
	`bytes` integer NOT NULL,
	PRIMARY KEY(`owner`, `day`)
);
