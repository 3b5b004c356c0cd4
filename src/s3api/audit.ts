/**
 * What the operator's commands (src/ops) read of the S3 API's multipart uploads: each part holds
 * one reference to its content on the upload's back-end (multipart.ts), which the consistency
 * check adds to the file rows when it counts a content row's holders; and the uploads in progress
 * per account, for the usage report. The S3 API keeps its tables to itself; this is the way in.
 */
import type { Queryable } from "../db/sql.ts";

const PARTS_BY_CID = `SELECT u.backend, p.cid, COUNT(*) AS n FROM s3_parts p JOIN s3_uploads u ON u.id = p.upload_id GROUP BY u.backend, p.cid`;
const PARTS_OF = `SELECT COUNT(*) AS n FROM s3_parts p JOIN s3_uploads u ON u.id = p.upload_id WHERE u.backend = $1 AND p.cid = $2`;
/** Parts whose upload row is gone: they hold a reference no upload will drop. */
const ORPHAN_PARTS = `SELECT COUNT(*) AS n FROM s3_parts p WHERE NOT EXISTS (SELECT 1 FROM s3_uploads u WHERE u.id = p.upload_id)`;
const OPEN_BY_ACCOUNT = `SELECT u.did, COUNT(DISTINCT u.id) AS uploads, COUNT(p.part_number) AS parts, CAST(COALESCE(SUM(p.size), 0) AS BIGINT) AS bytes
  FROM s3_uploads u LEFT JOIN s3_parts p ON p.upload_id = u.id WHERE u.expires_at > $1 GROUP BY u.did ORDER BY u.did`;

/** References held by multipart parts, by back-end and content Cid. */
export async function partHolders(q: Queryable): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const r of await q.all<{ backend: string; cid: string; n: number }>(PARTS_BY_CID)) out.set(`${r.backend}:${r.cid}`, r.n);
  return out;
}

/** References parts hold on one content row now. */
export async function partHoldersOf(q: Queryable, backend: string, cid: string): Promise<number> {
  return (await q.get<{ n: number }>(PARTS_OF, [backend, cid]))?.n ?? 0;
}

/** Parts whose upload row is gone. */
export async function orphanParts(q: Queryable): Promise<number> {
  return (await q.get<{ n: number }>(ORPHAN_PARTS))?.n ?? 0;
}

/** Multipart uploads in progress per account: uploads, parts received and their bytes. */
export function openUploads(q: Queryable, now: number): Promise<{ did: string; uploads: number; parts: number; bytes: number }[]> {
  return q.all(OPEN_BY_ACCOUNT, [now]);
}
