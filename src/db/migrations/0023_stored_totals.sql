CREATE TABLE `stored_totals` (
	`did` text PRIMARY KEY NOT NULL,
	`bytes` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
-- Written by hand (drizzle-kit cannot express triggers): `stored_totals` follows `files` in the
-- statement that changes a file row, so every path that records, replaces or deletes a file —
-- uploads, the S3 API, a gateway of the previous version sharing this database (D16) — keeps it
-- exact without knowing it exists. Relative updates only: concurrent writers add, never overwrite.
CREATE TRIGGER `files_stored_insert` AFTER INSERT ON `files` BEGIN
	INSERT INTO `stored_totals` (`did`, `bytes`) VALUES (NEW.`did`, NEW.`size`)
		ON CONFLICT (`did`) DO UPDATE SET `bytes` = `stored_totals`.`bytes` + excluded.`bytes`;
END;
--> statement-breakpoint
CREATE TRIGGER `files_stored_delete` AFTER DELETE ON `files` BEGIN
	UPDATE `stored_totals` SET `bytes` = `bytes` - OLD.`size` WHERE `did` = OLD.`did`;
END;
--> statement-breakpoint
-- Nothing updates a file's size or owner today; if something does, the total follows.
CREATE TRIGGER `files_stored_update` AFTER UPDATE OF `did`, `size` ON `files` BEGIN
	UPDATE `stored_totals` SET `bytes` = `bytes` - OLD.`size` WHERE `did` = OLD.`did`;
	INSERT INTO `stored_totals` (`did`, `bytes`) VALUES (NEW.`did`, NEW.`size`)
		ON CONFLICT (`did`) DO UPDATE SET `bytes` = `stored_totals`.`bytes` + excluded.`bytes`;
END;
--> statement-breakpoint
-- The files already there. The migration is one write transaction (src/db/open.ts): no file row
-- can change between this count and the triggers.
INSERT INTO `stored_totals` (`did`, `bytes`) SELECT `did`, SUM(`size`) FROM `files` GROUP BY `did`;
