import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import solc from "solc";
import { artifactsDir, compileContracts, contractNames, exportBase } from "../../contracts/compile.ts";
import * as artifacts from "../../src/chain/artifacts/index.ts";

describe("contract artifacts", () => {
  test("the committed artifacts are exactly what the contracts compile to", () => {
    const fresh = compileContracts();
    const committed = Object.fromEntries(
      readdirSync(artifactsDir)
        .sort()
        .map((file) => [file, readFileSync(join(artifactsDir, file), "utf8")]),
    );
    // On failure: run `bun run contracts:build` and commit src/chain/artifacts.
    expect(Object.keys(committed)).toEqual(Object.keys(fresh).sort());
    for (const [file, text] of Object.entries(fresh)) expect(committed[file]).toBe(text);
  }, 120_000);

  test("they are built by the solc version pinned in package.json", async () => {
    const pkg = (await Bun.file(join(import.meta.dir, "../../package.json")).json()) as {
      devDependencies: Record<string, string>;
    };
    expect(solc.version().startsWith(`${pkg.devDependencies.solc}+`)).toBe(true);
  });

  test("every contract exports a typed ABI and both bytecodes", () => {
    const exported: Record<string, unknown> = artifacts;
    for (const name of contractNames) {
      const base = exportBase(name);
      expect(Array.isArray(exported[`${base}Abi`])).toBe(true);
      expect(exported[`${base}Bytecode`]).toMatch(/^0x[0-9a-f]{100,}$/);
      expect(exported[`${base}DeployedBytecode`]).toMatch(/^0x[0-9a-f]{100,}$/);
    }
    expect(Object.keys(artifacts).sort()).toEqual(
      contractNames.flatMap((n) => ["Abi", "Bytecode", "DeployedBytecode"].map((s) => exportBase(n) + s)).sort(),
    );
  });
});
