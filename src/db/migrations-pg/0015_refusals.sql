-- Written by hand: a refusal the database decides (src/db/sql.ts `refuseWhen`). A query that
-- answers a row when a call must be refused is wrapped as `SELECT stowage_refuse(row) FROM (…)`,
-- so its row aborts the transaction with SQLSTATE SW001 and the row as JSON in DETAIL. An
-- upload's last statements then need no answer before their COMMIT, which goes out with them
-- (issue 10: one round trip less under the account's lock). VOLATILE: never folded; a target
-- list is evaluated only for the rows a query answers.
CREATE FUNCTION stowage_refuse(detail text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'SW001', MESSAGE = 'refused by a check of the transaction', DETAIL = detail;
END
$$;
