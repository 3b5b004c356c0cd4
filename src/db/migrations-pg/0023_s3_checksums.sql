ALTER TABLE "files" ADD COLUMN "checksum" text;--> statement-breakpoint
ALTER TABLE "files" ADD COLUMN "parts" text;--> statement-breakpoint
ALTER TABLE "s3_parts" ADD COLUMN "checksum" text;--> statement-breakpoint
ALTER TABLE "s3_uploads" ADD COLUMN "checksum_algorithm" text;--> statement-breakpoint
ALTER TABLE "s3_uploads" ADD COLUMN "checksum_type" text;