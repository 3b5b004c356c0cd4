/**
 * A 1 GiB encrypted round trip in flat memory (D20: "memory does not grow with the
 * file"), the SDK's upload path without the network: sealed once into the spool file, the spool
 * hashed, then read again and decrypted as it streams (age-large-round-trip.ts, in a process of
 * its own so that its RSS is its own). 1 GiB on the native AEAD (the system's OpenSSL), which the
 * command line and the SDK on Bun use; 256 MiB on libsodium's WASM, the SDK's default on Node and browsers. Measured on
 * two cores at load 18 (a bench alongside): 52 s and 12.5 s, RSS +54 and +55 MiB. The WASM GiB
 * would add about 50 s more to a CI run for the same claim (it is the same streaming code; only
 * the AEAD differs). A buffering implementation holds the whole file and fails either. This runs
 * once per CI, replacing the 256 MiB test/encryption/large.test.ts that ran in all three passes
 * (SQLite, S3, PostgreSQL) though it touches neither a database nor a blob store.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";

async function roundTrip(mib: number, aead: "native" | "wasm") {
  const child = Bun.spawn([process.execPath, join(import.meta.dir, "age-large-round-trip.ts"), String(mib), aead], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  expect(code, err).toBe(0);
  const r = JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as { aead: string; total: number; sealedBytes: number; expectedSealed: number; plainBytes: number; byteExact: boolean; sameCiphertext: boolean; grewMiB: number; seconds: number };
  expect(r.aead).toBe(aead === "native" ? "openssl-native" : "libsodium");
  expect(r.sealedBytes).toBe(r.expectedSealed);
  expect(r.plainBytes).toBe(r.total);
  expect(r.byteExact).toBe(true);
  expect(r.sameCiphertext).toBe(true);
  console.log(`${r.aead}: rss grew ${r.grewMiB.toFixed(1)} MiB over a ${(r.total / 2 ** 20).toFixed(0)} MiB round trip in ${r.seconds.toFixed(1)} s`);
  // An eighth of 1 GiB, half of 256 MiB: streaming stays near 25–60 MiB whatever the size (garbage
  // between collections, and the 1 MiB pieces of a sealed batch).
  expect(r.grewMiB).toBeLessThan(128);
}

test("1 GiB sealed once into the spool, hashed, read again and decrypted as streams (native AEAD): byte-exact, memory flat", () => roundTrip(1024, "native"), 300_000);

test("256 MiB the same way on libsodium's WASM (the SDK's default on Node and browsers): byte-exact, memory flat", () => roundTrip(256, "wasm"), 300_000);
