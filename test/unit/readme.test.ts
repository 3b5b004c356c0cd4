import { expect, test } from "bun:test";
import { join } from "node:path";
import { settings } from "../../src/config.ts";

test("the README's settings table lists every setting with its default", async () => {
  const readme = await Bun.file(join(import.meta.dir, "..", "..", "README.md")).text();
  for (const s of Object.values(settings)) {
    const row = readme.split("\n").find((l) => l.startsWith(`| \`${s.env}\` |`));
    expect(row, `README row for ${s.env}`).toBeDefined();
    if ("default" in s && s.default !== "") expect(row).toContain(`\`${s.default}\``);
  }
});

// bench/README.md keeps one current table per bench with the command that made it; a table is
// replaced when it is measured again (the runs before are in git), so the file stays short enough
// to read. A file that grows past this is collecting a diary.
test("bench/README.md holds one current table per bench: under 400 lines, every bench named", async () => {
  const text = await Bun.file(new URL("../../bench/README.md", import.meta.url)).text();
  expect(text.trimEnd().split("\n").length).toBeLessThan(400);
  const sections = [...text.matchAll(/^## (\S+):/gm)].map((m) => m[1]);
  const benches = [...new Bun.Glob("*.ts").scanSync(new URL("../../bench", import.meta.url).pathname)].map((f) => f.replace(/\.ts$/, "")).filter((b) => b !== "harness" && b !== "load-worker");
  expect(benches.filter((b) => !sections.includes(b))).toEqual([]);
});
