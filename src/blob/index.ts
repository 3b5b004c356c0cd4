/**
 * Opens the blob store the configuration asks for (DESIGN.md D15): S3 when
 * `STOWAGE_S3_ENDPOINT` is set, else local files under the data dir. Config validation has
 * already made sure an endpoint comes with its bucket and keys.
 */
import { join } from "node:path";
import type { Config } from "../config.ts";
import { LocalBlobStore } from "./local.ts";
import { S3BlobStore } from "./s3.ts";
import type { BlobStore } from "./store.ts";

export { BlobError, type BlobErrorCode, type BlobRange, type BlobSource, type BlobStore, isBlobError } from "./store.ts";
export { claimants, claimDeployment, DEPLOYMENT_PREFIX } from "./deployment.ts";
export { LocalBlobStore } from "./local.ts";
export { S3BlobStore } from "./s3.ts";

export type BlobConfig = Pick<Config, "dataDir" | "s3Endpoint" | "s3Bucket" | "s3Region" | "s3Prefix" | "s3AccessKeyId" | "s3SecretAccessKey">;

/** Where the local store keeps its files. */
export const localBlobRoot = (dataDir: string): string => join(dataDir, "blobs");

/**
 * The configured store; an S3 one is probed first, so bad keys or a missing bucket fail here.
 * `sweepTemps` (the server's start, before anything writes to the store) removes the temporary
 * files of writes a crash cut short; an operator's command that reads the store of a running
 * server passes false, as that server's uploads are writing theirs.
 */
export async function openBlobStore(config: BlobConfig, opts: { sweepTemps?: boolean } = {}): Promise<BlobStore> {
  if (config.s3Endpoint === undefined) {
    const local = new LocalBlobStore(localBlobRoot(config.dataDir));
    if (opts.sweepTemps ?? true) await local.removeLeftoverTemps();
    return local;
  }
  const { s3Bucket: bucket, s3AccessKeyId: accessKeyId, s3SecretAccessKey: secretAccessKey } = config;
  if (!bucket || !accessKeyId || !secretAccessKey) throw new Error("openBlobStore: S3 settings incomplete (parseConfig checks them)");
  const store = new S3BlobStore({ endpoint: config.s3Endpoint, bucket, region: config.s3Region, prefix: config.s3Prefix, accessKeyId, secretAccessKey });
  await store.probe();
  return store;
}
