/**
 * The secrets key (D16, D18): STOWAGE_SECRETS_KEY when set (every gateway of a cluster the same),
 * else one generated once in data/secrets, private; and what the sealed secrets it keys refuse.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { ConfigError, parseConfig } from "../../src/config.ts";
import { loadSecrets } from "../../src/datadir/secrets.ts";
import { SealedSecretError, secretBox } from "../../src/keys/secret-box.ts";
import { tempDir } from "../support/tmp.ts";

const none = { operatorKey: undefined, adminKey: undefined };

describe("the secrets key", () => {
  test("is generated once in data/secrets (0600, 32 bytes) and kept across restarts, apart from the JWT key", () => {
    const dir = tempDir("keys-sec");
    const a = loadSecrets(dir, none);
    const path = join(dir, "secrets", "secrets.key");
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readFileSync(path, "utf8").trim()).toBe(`0x${Buffer.from(a.secretsKey).toString("hex")}`);
    expect(a.secretsKey).toHaveLength(32);
    expect(Buffer.from(a.secretsKey).equals(Buffer.from(a.jwtKey))).toBe(false);
    expect(loadSecrets(dir, none).secretsKey).toEqual(a.secretsKey);
    expect(loadSecrets(tempDir("keys-sec"), none).secretsKey).not.toEqual(a.secretsKey);
  });

  test("STOWAGE_SECRETS_KEY wins and is not written; a malformed one stops the start", () => {
    const dir = tempDir("keys-sec");
    const config = parseConfig([], { STOWAGE_SECRETS_KEY: `0x${"5e".repeat(32)}` });
    expect(Buffer.from(loadSecrets(dir, { ...none, secretsKey: config.secretsKey }).secretsKey).toString("hex")).toBe("5e".repeat(32));
    expect(() => statSync(join(dir, "secrets", "secrets.key"))).toThrow();
    for (const bad of ["5e".repeat(32), `0x${"5e".repeat(16)}`, "secret"]) expect(() => parseConfig([], { STOWAGE_SECRETS_KEY: bad })).toThrow(ConfigError);
  });
});

describe("sealed secrets", () => {
  const key = crypto.getRandomValues(new Uint8Array(32));
  const box = secretBox(key, "s3-access-key-secret");

  test("round-trip, with a fresh nonce each time", () => {
    const a = box.seal("the secret", "row-1");
    expect(a).not.toBe(box.seal("the secret", "row-1"));
    expect(box.open(a, "row-1")).toBe("the secret");
  });

  test("refuse another row, another purpose, another key, and any changed byte", () => {
    const sealed = box.seal("the secret", "row-1");
    const refused = (f: () => unknown) => expect(f).toThrow(SealedSecretError);
    refused(() => box.open(sealed, "row-2"));
    refused(() => secretBox(key, "another-purpose").open(sealed, "row-1"));
    refused(() => secretBox(crypto.getRandomValues(new Uint8Array(32)), "s3-access-key-secret").open(sealed, "row-1"));
    const bytes = Buffer.from(sealed.slice(3), "base64url");
    for (const i of [0, 11, 12, bytes.length - 1]) {
      const changed = Buffer.from(bytes);
      changed[i] = (changed[i] as number) ^ 1;
      refused(() => box.open(`v1.${changed.toString("base64url")}`, "row-1"));
    }
    refused(() => box.open(`v2.${sealed.slice(3)}`, "row-1"));
    refused(() => box.open("v1.", "row-1"));
  });

  test("a key that is not 32 bytes is refused", () => {
    expect(() => secretBox(new Uint8Array(16), "x")).toThrow(/32 bytes/);
  });
});
