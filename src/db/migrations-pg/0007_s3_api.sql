CREATE TABLE "s3_parts" (
	"upload_id" text NOT NULL,
	"part_number" bigint NOT NULL,
	"cid" text NOT NULL,
	"size" bigint NOT NULL,
	"md5" text NOT NULL,
	"created_at" bigint NOT NULL,
	CONSTRAINT "s3_parts_upload_id_part_number_pk" PRIMARY KEY("upload_id","part_number")
);
--> statement-breakpoint
CREATE TABLE "s3_uploads" (
	"id" text PRIMARY KEY NOT NULL,
	"did" text NOT NULL,
	"backend" text NOT NULL,
	"name" text COLLATE "C" NOT NULL,
	"content_type" text,
	"reservation" bigint,
	"created_at" bigint NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
ALTER TABLE "files" ADD COLUMN "etag" text;--> statement-breakpoint
CREATE INDEX "s3_uploads_did" ON "s3_uploads" USING btree ("did","backend","name");--> statement-breakpoint
CREATE INDEX "s3_uploads_expiry" ON "s3_uploads" USING btree ("expires_at");