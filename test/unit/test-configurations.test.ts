/**
 * The table of test configurations (test/configurations.ts) as `npm test` reads it
 * (scripts/test-all.ts): every folder of tests is named, a file's own entry decides over its
 * folder's, a folder is passed as a path prefix (test/s3/ never takes in test/s3api/), and a
 * folder the table does not name is reported before anything runs.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join, relative } from "node:path";
import { plan } from "../../scripts/test-all.ts";

const ROOT = join(import.meta.dir, "..", "..");
const files = (readdirSync(join(ROOT, "test"), { recursive: true }) as string[]).filter((f) => f.endsWith(".test.ts")).map((f) => relative(ROOT, join(ROOT, "test", f)));

describe("test configurations", () => {
  test("every folder of tests is in the table; the first pass runs every file", () => {
    const { missing, passes } = plan(files);
    expect(missing).toEqual([]);
    expect(passes["sqlite+local"]).toBe("all");
  });

  test("suites that keep state run on PostgreSQL, suites that store content on S3", () => {
    const { passes } = plan(files);
    for (const folder of ["test/storage/", "test/quota/", "test/directory/", "test/gateway/", "test/encryption/"]) {
      expect(passes["postgres+local"]).toContain(folder);
      expect(passes["sqlite+s3"]).toContain(folder);
    }
    expect(passes["postgres+local"]).toContain("test/keys/");
    // A file's own entry decides: the S3 API's in-process suite runs on PostgreSQL, its client suites do not.
    expect(passes["postgres+local"]).toContain("test/s3api/api.test.ts");
    expect(passes["postgres+local"]).not.toContain("test/s3api/");
    expect(passes["sqlite+s3"]).toContain("test/s3api/");
    expect(passes["sqlite+s3"]).not.toContain("test/s3/");
  });

  test("a folder the table does not name is reported", () => {
    const { missing } = plan([...files, "test/new-capability/a.test.ts", "test/new-capability/deeper/b.test.ts"]);
    expect(missing).toEqual(["test/new-capability", "test/new-capability/deeper"]);
  });
});
