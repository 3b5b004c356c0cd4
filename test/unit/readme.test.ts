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
