-- The bytes of a purchase or grant as numeric(20, 0): every uint64 (a 9 EiB grant passes int8).
-- A widening: every int8 converts exactly, and SQL sums over the column still work.
ALTER TABLE "quota_events" ALTER COLUMN "bytes" SET DATA TYPE numeric(20, 0);