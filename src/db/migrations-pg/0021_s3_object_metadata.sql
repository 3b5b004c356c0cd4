ALTER TABLE "files" ADD COLUMN "metadata" text;--> statement-breakpoint
ALTER TABLE "s3_parts" ADD COLUMN "copied" boolean;--> statement-breakpoint
ALTER TABLE "s3_uploads" ADD COLUMN "metadata" text;