/** The committed test-wallet artifacts are what contracts/test/*.sol compile to. */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { artifactFile, compileTestContracts } from "../../contracts/test/compile.ts";

test("test/support/artifacts/test-wallets.ts matches contracts/test (run `bun contracts/test/compile.ts`)", () => {
  expect(readFileSync(artifactFile, "utf8")).toBe(compileTestContracts());
});
