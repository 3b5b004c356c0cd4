/**
 * Which blob store the tests run on (DESIGN.md D15), chosen for the whole test process by
 * `STOWAGE_TEST_BLOBS`: unset or `local` = files in the data dir, `s3` = the shared Ceph RGW of
 * test/support/ceph.ts. `npm test` runs the storage, quota, directory and e2e suites a second
 * time with `s3`, so one test proves both stores without being written twice. Only test support
 * reads the switch; the server sees ordinary STOWAGE_S3_* settings, as an operator would set them.
 *
 * Each data dir gets its own key prefix, kept for the life of the process: a server restarted
 * over the same data dir finds its objects again, and two servers never see each other's.
 */
import { cephRgw, stowageS3Env, type Rgw } from "./ceph.ts";
import { LocalBlobStore, S3BlobStore, localBlobRoot, type BlobStore } from "../../src/blob/index.ts";

const chosen = process.env.STOWAGE_TEST_BLOBS ?? "local";
if (chosen !== "local" && chosen !== "s3") throw new Error(`STOWAGE_TEST_BLOBS: "local" or "s3" (got ${JSON.stringify(chosen)})`);

export const TEST_BLOBS: "local" | "s3" = chosen;

/** The Ceph RGW when the tests run on S3; started when this module loads, outside any timeout. */
export const testRgw: Rgw | undefined = TEST_BLOBS === "s3" ? await cephRgw() : undefined;

const prefixes = new Map<string, string>();

/** The key prefix of the server over `dataDir` (a new one on the first call for that dir). */
export function prefixOf(dataDir: string): string | undefined {
  if (!testRgw) return undefined;
  let prefix = prefixes.get(dataDir);
  if (prefix === undefined) {
    prefix = testRgw.prefix();
    prefixes.set(dataDir, prefix);
  }
  return prefix;
}

/** The STOWAGE_S3_* settings of a server over `dataDir`: none on the local store. */
export function blobEnv(dataDir: string): Record<string, string> {
  const prefix = prefixOf(dataDir);
  return testRgw && prefix !== undefined ? stowageS3Env(testRgw, prefix) : {};
}

/** True when a test set blob-store settings of its own (then support adds none). */
export const setsBlobs = (env: Record<string, string | undefined> = {}): boolean => Object.keys(env).some((k) => k.startsWith("STOWAGE_S3_") && k !== "STOWAGE_S3_API_PORT");

/** The store a server over `dataDir` uses, opened beside it: for tests that look at the objects. */
export function blobStoreOf(dataDir: string): BlobStore {
  const prefix = prefixOf(dataDir);
  if (!testRgw || prefix === undefined) return new LocalBlobStore(localBlobRoot(dataDir));
  return new S3BlobStore({ endpoint: testRgw.endpoint, bucket: testRgw.bucket, region: testRgw.region, prefix, accessKeyId: testRgw.accessKeyId, secretAccessKey: testRgw.secretAccessKey });
}
