/**
 * A large encrypted round trip in flat memory (D20: "memory does not grow with the file"): 256 MiB
 * generated on the fly are sealed the upload's way (prepareEncryption: the same ciphertext in the
 * hash pass and the upload pass) and the second pass is decrypted as it streams. It runs in a
 * process of its own (large-round-trip.ts), so its RSS is its own; that RSS grows by far less than
 * the file. A buffering implementation holds the whole file (≥ 256 MiB) and fails this.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";

test("256 MiB sealed, hashed and decrypted as streams: the same ciphertext twice, memory flat", async () => {
  const child = Bun.spawn([process.execPath, join(import.meta.dir, "large-round-trip.ts"), "256"], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  expect(code, err).toBe(0);
  const r = JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as { total: number; sealedBytes: number; expectedSealed: number; plainBytes: number; sameCiphertext: boolean; grewMiB: number };
  expect(r.sealedBytes).toBe(r.expectedSealed);
  expect(r.plainBytes).toBe(r.total);
  expect(r.sameCiphertext).toBe(true);
  console.log(`rss grew ${r.grewMiB.toFixed(1)} MiB over a ${(r.total / 2 ** 20).toFixed(0)} MiB round trip`);
  // Half the file: a buffering implementation holds all of it. Streaming stays near 60–80 MiB
  // whatever the size (768 MiB: the same) — garbage between collections, more of it since the
  // payload runs on libsodium's WASM at three times @noble's pace (with @noble: ≈ 26 MiB).
  expect(r.grewMiB).toBeLessThan(128);
}, 300_000);
