/**
 * No text a user reads cites a design or issue number (test/support/citations.ts says what one
 * looks like): not the README, not the settings catalog (the source of `--help` and the README's table), not a
 * string anywhere in src — error messages of the account API, storage, S3 and the command line,
 * OpenAPI summaries and descriptions, the console's every word (its .ts and its page). Comments
 * may cite them; they are for engineers. test/e2e/user-text.test.ts reads what the compiled binary
 * prints and serves, which catches text put together at run time.
 */
import { expect, test } from "bun:test";
import { Glob } from "bun";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as ts from "typescript";
import { settings } from "../../src/config.ts";
import { citationIn, citing } from "../support/citations.ts";

const ROOT = join(import.meta.dir, "..", "..");

test("the matcher finds design, spec, issue and action citations, and passes Cids, hashes and standards", () => {
  for (const cited of ["escrowed to it (D20)", "D9's scrub", "cannot be deleted (spec rule 4)", "Remaining space (spec 2.6)", "row 7 of the spec", `see issue ${6 * 7}` /* an example citation, built so the source cites none */, "renewals (action 6)"]) {
    expect(citationIn(cited), cited).toBeDefined();
  }
  for (const plain of ["bafybeigd5hkr3m6zd7xbd2dq3n6xq", "0xd5a1D2", "SHA-256 of the file", "EIP-712 typed data", "an IPv6 /64", "AES-256-GCM", "Day 2 of 30", "action: 'age'", "D-Bus"]) {
    expect(citationIn(plain), plain).toBeUndefined();
  }
});

test("the settings catalog's help (--help, the README's table) cites no design or issue number", () => {
  expect(citing(Object.entries(settings).map(([name, s]) => [name, s.help] as const))).toEqual([]);
});

/** Every string literal and template text of a TypeScript file, with its line. */
function stringsOf(file: string): [string, string][] {
  const source = ts.createSourceFile(file, readFileSync(join(ROOT, file), "utf8"), ts.ScriptTarget.Latest, true);
  const found: [string, string][] = [];
  const visit = (node: ts.Node) => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateHead(node) || ts.isTemplateMiddle(node) || ts.isTemplateTail(node)) {
      found.push([`${file}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`, node.text]);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

test("no string in src (errors, OpenAPI, command line, console) cites a design or issue number", () => {
  const files = [...new Glob("src/**/*.ts").scanSync(ROOT)].sort();
  expect(files.length).toBeGreaterThan(100);
  const strings = files.flatMap(stringsOf);
  // Error messages, help texts and the console's words are all in there.
  for (const known of ["The signature does not match the message's address", "Publishes a file you store at this gateway", "Link a wallet"]) {
    expect(strings.some(([, s]) => s.includes(known)), known).toBe(true);
  }
  expect(citing(strings)).toEqual([]);
  // Parsing every file of src takes a few seconds, more on a loaded machine.
}, 60_000);

test("the console's page (its HTML) cites no design or issue number", () => {
  const pages = [...new Glob("src/console/web/**/*.html").scanSync(ROOT)];
  expect(pages.length).toBeGreaterThan(0);
  // Markup comments are for engineers, like source comments.
  expect(citing(pages.map((p) => [p, readFileSync(join(ROOT, p), "utf8").replace(/<!--[\s\S]*?-->/g, "")] as const))).toEqual([]);
});

test("the README cites no design or issue number", () => {
  // Markup comments are for engineers; emptied, not removed, so line numbers stay the file's.
  const lines = readFileSync(join(ROOT, "README.md"), "utf8").replace(/<!--[\s\S]*?-->/g, (c) => c.replace(/[^\n]/g, "")).split("\n");
  expect(citing(lines.map((line, i) => [`README.md:${i + 1}`, line] as const))).toEqual([]);
});
