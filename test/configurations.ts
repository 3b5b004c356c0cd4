/**
 * Which configurations each test folder runs on: the one table `npm test` reads
 * (scripts/test-all.ts). A pass is a database and a blob store, chosen for the whole test process
 * by STOWAGE_TEST_DB (test/support/db.ts) and STOWAGE_TEST_BLOBS (test/support/blobs.ts). Every
 * folder that holds tests must be named here, or the test command refuses to run: a new folder
 * cannot run on SQLite and local files alone without saying so.
 *
 * An entry is a folder (it covers the folders below it) or one file; the most specific entry
 * decides. Suites that keep state in the database run on PostgreSQL too; suites that store
 * content run on the S3 blob store too.
 */

export const PASSES = {
  "sqlite+local": {},
  "sqlite+s3": { STOWAGE_TEST_BLOBS: "s3" },
  "postgres+local": { STOWAGE_TEST_DB: "postgres" },
} as const satisfies Record<string, Record<string, string>>;

export type Pass = keyof typeof PASSES;

const EVERY: readonly Pass[] = ["sqlite+local", "sqlite+s3", "postgres+local"];
const BOTH_DATABASES: readonly Pass[] = ["sqlite+local", "postgres+local"];
const BOTH_STORES: readonly Pass[] = ["sqlite+local", "sqlite+s3"];
const PLAIN: readonly Pass[] = ["sqlite+local"];

export const TEST_CONFIGURATIONS: Record<string, readonly Pass[]> = {
  "test/accounts": BOTH_DATABASES,
  "test/blob": BOTH_DATABASES,
  "test/chain": PLAIN,
  "test/chain/indexer.test.ts": BOTH_DATABASES,
  "test/console": PLAIN,
  "test/contracts": PLAIN,
  "test/db": BOTH_DATABASES,
  "test/denylist": PLAIN,
  "test/directory": EVERY,
  "test/e2e": BOTH_STORES,
  "test/encryption": EVERY,
  "test/gateway": EVERY,
  "test/grants": EVERY,
  "test/http": PLAIN,
  "test/identity": PLAIN,
  "test/keys": BOTH_DATABASES,
  "test/metrics": PLAIN,
  "test/ops": PLAIN,
  "test/ops/check.test.ts": EVERY,
  "test/ops/hold.test.ts": EVERY,
  "test/ops/usage.test.ts": BOTH_DATABASES,
  "test/psa": EVERY,
  "test/quota": EVERY,
  "test/readme": PLAIN,
  "test/s3": PLAIN,
  "test/s3api": BOTH_STORES,
  "test/s3api/api.test.ts": EVERY,
  "test/s3api/checksums.test.ts": EVERY,
  "test/s3api/conditions.test.ts": EVERY,
  "test/s3api/paging.test.ts": EVERY,
  "test/s3api/protocol.test.ts": EVERY,
  "test/s3api/requests.test.ts": EVERY,
  "test/sdk": PLAIN,
  "test/storage": EVERY,
  "test/unit": PLAIN,
};
