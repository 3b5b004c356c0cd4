/**
 * The deployment marker (DESIGN.md D15): a deployment claims the store's prefix before it sweeps,
 * because a sweep deletes what no row of *its own* database references, and two deployments
 * pointed at one bucket and prefix by mistake would delete each other's content.
 *
 * A claim is the object `stowage-deployment/<id>`. S3 has no create-if-absent that every store
 * (and Bun's client) offers, so a claim is "write mine, then list": a deployment owns the prefix
 * when its claim is the only one listed. With read-after-write and list-after-write consistency
 * (S3 since 2020, Ceph RGW always) two claimants racing can never both see themselves alone; at
 * worst both see each other, both withdraw and both refuse to start, which is the right answer
 * to two deployments sharing a prefix.
 */
import { BlobError, type BlobStore, checkKey } from "./store.ts";

export const DEPLOYMENT_PREFIX = "stowage-deployment/";

/**
 * Claims `store` for `deploymentId` (a stable id of the deployment's database, such as its
 * installation id), or throws BlobError BlobDeploymentMismatch naming the other claimants.
 */
export async function claimDeployment(store: BlobStore, deploymentId: string): Promise<void> {
  if (deploymentId.includes("/")) throw new BlobError("BlobInvalidKey", "a deployment id has no /");
  const mine = DEPLOYMENT_PREFIX + checkKey(deploymentId);
  const before = await claimants(store);
  if (before.length === 1 && before[0] === deploymentId) return;
  if (before.length > 0) throw mismatch(before.filter((id) => id !== deploymentId), deploymentId);
  await store.put(mine, new TextEncoder().encode(`${deploymentId}\n${new Date().toISOString()}\n`));
  const after = await claimants(store);
  if (after.length === 1 && after[0] === deploymentId) return;
  // Someone else claimed at the same moment: withdraw, so a later start of either can claim.
  await store.delete(mine);
  throw mismatch(after.filter((id) => id !== deploymentId), deploymentId);
}

/** The deployments that have claimed the store (normally one). */
export async function claimants(store: BlobStore): Promise<string[]> {
  const out: string[] = [];
  for await (const key of store.list(DEPLOYMENT_PREFIX)) {
    const id = key.slice(DEPLOYMENT_PREFIX.length);
    if (!id.includes("/")) out.push(id);
  }
  return out.sort();
}

function mismatch(others: string[], wanted: string): BlobError {
  return new BlobError(
    "BlobDeploymentMismatch",
    `this blob store is claimed by deployment ${others.join(", ")}, not ${wanted} (objects ${DEPLOYMENT_PREFIX}<id> under its prefix): give each deployment its own bucket or STOWAGE_S3_PREFIX`,
  );
}
