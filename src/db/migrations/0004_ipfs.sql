CREATE TABLE `ipfs_pins` (
	`cid` text PRIMARY KEY NOT NULL,
	`refs` integer NOT NULL,
	`size` integer NOT NULL
);
