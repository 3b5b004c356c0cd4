DROP INDEX "users_address_idx";--> statement-breakpoint
CREATE UNIQUE INDEX "users_address_uq" ON "users" USING btree ("address");