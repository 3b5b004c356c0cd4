/** Prints the README's settings table from the config catalog: `bun scripts/settings-table.ts`. */
import { settings } from "../src/config.ts";

console.log("| Environment variable | Flag of `stowage serve` | Default | Meaning |");
console.log("|---|---|---|---|");
for (const s of Object.values(settings)) {
  const client = "scope" in s && s.scope === "client" ? " (user commands)" : "";
  const flag = ("flag" in s ? `\`${s.flag}\`` : "(environment only: secret)") + client;
  const def = "default" in s ? (s.default === "" ? "empty" : `\`${s.default}\``) : "unset";
  console.log(`| \`${s.env}\` | ${flag} | ${def} | ${s.help} |`);
}
