/**
 * The user commands' short flags: one meaning each across commands (-o --out, -j --json,
 * -q --quiet, -n --name, -t --to, -f --from), taken only by a command that has the long form,
 * listed in its help; "-" alone stays a positional (`put -` reads stdin). Parsed by node:util's
 * parseArgs (strict), its errors said in this command line's words.
 */
import { expect, test } from "bun:test";
import { ConfigError } from "../../src/config.ts";
import { parseInvocation } from "../../src/cli/user/common.ts";
import { userCommands } from "../../src/cli/user/index.ts";

const env = { STOWAGE_GATEWAY: "http://127.0.0.1:9" };

test("short flags stand for their long forms, where the command has them", () => {
  const put = parseInvocation(["-", "-n", "notes.txt", "-t", "ipfs", "-q"], { flags: ["--to", "--name"], switches: ["--json", "--quiet"] }, env);
  expect(put.positionals).toEqual(["-"]);
  expect(Object.fromEntries(put.flags)).toEqual({ "--name": "notes.txt", "--to": "ipfs", "--quiet": "true" });
  const get = parseInvocation(["bafy", "-f", "dfs", "-o", "out.bin"], { flags: ["--from", "--out", "--range"] }, env);
  expect(Object.fromEntries(get.flags)).toEqual({ "--from": "dfs", "--out": "out.bin" });
  expect(() => parseInvocation(["bafy", "-q"], { flags: ["--from", "--out"] }, env)).toThrow(new ConfigError("unknown option -q"));
  expect(() => parseInvocation(["-x"], { switches: ["--json"] }, env)).toThrow(new ConfigError("unknown option -x"));
  expect(() => parseInvocation(["-o"], { flags: ["--out"] }, env)).toThrow(new ConfigError("--out needs a value"));
  // node:util's parse errors in this command line's words.
  expect(() => parseInvocation(["-1"], {}, env)).toThrow(new ConfigError("unknown option -1"));
  expect(() => parseInvocation(["--nope"], {}, env)).toThrow(new ConfigError("unknown option --nope"));
  expect(() => parseInvocation(["--json=yes"], { switches: ["--json"] }, env)).toThrow(new ConfigError("--json takes no value"));
  expect(() => parseInvocation(["--out", "-j"], { flags: ["--out"], switches: ["--json"] }, env)).toThrow(new ConfigError('--out needs a value (one that starts with "-" goes as --out=-…)'));
  expect(parseInvocation(["--out=-x", "--keyword", "a", "--keyword=b", "--", "-y"], { flags: ["--out"], repeated: ["--keyword"] }, env)).toMatchObject({
    flags: new Map([["--out", "-x"]]),
    repeated: new Map([["--keyword", ["a", "b"]]]),
    positionals: ["-y"],
  });
  expect(parseInvocation(["--gateway", "http://gw.example:1"], {}, env).gateway).toBe("http://gw.example:1");
});

test("each command's help lists the short flags it takes", () => {
  const commands = userCommands(env);
  expect(commands.put?.help()).toContain("Short flags: -j --json, -q --quiet, -n --name, -t --to");
  expect(commands.get?.help()).toContain("Short flags: -o --out, -f --from");
  expect(commands.rm?.help()).toContain("Short flags: -j --json");
  expect(commands.deposit?.help()).toContain("Short flags: -j --json");
});
