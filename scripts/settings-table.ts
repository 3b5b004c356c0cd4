/**
 * Prints the README's settings table from the config catalog: `bun scripts/settings-table.ts`.
 * A setting without a flag is a secret (it never shows in a process list) unless it has a default
 * of its own: a user command's switch such as STOWAGE_ENCRYPT, set per call by that command's flags.
 * Cells are Markdown: a `|` in a help text is escaped, or it would split the row.
 */
import { settings } from "../src/config.ts";

const cell = (text: string) => text.replaceAll("|", "\\|");

console.log("| Environment variable | Flag of `stowage serve` | Default | Meaning |");
console.log("|---|---|---|---|");
for (const s of Object.values(settings)) {
  const client = "scope" in s && s.scope === "client" ? " (user commands)" : "";
  const flag = ("flag" in s ? `\`${s.flag}\`` : "default" in s ? "(environment only)" : "(environment only: secret)") + client;
  const def = "default" in s ? (s.default === "" ? "empty" : `\`${s.default}\``) : "unset";
  console.log(`| \`${s.env}\` | ${flag} | ${def} | ${cell(s.help)} |`);
}
