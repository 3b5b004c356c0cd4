/**
 * `stowage get`'s size lookup (src/cli/user/transfer.ts sizeOf) when the HEAD is refused: it asks
 * again as a GET of no bytes for the refusal's words. If access changes between the two (the
 * gateway's indexer sees a grant just then: CI met it once in test/e2e/encryption-cli.test.ts, a
 * 402 for a zero-byte voucher instead of the file), the HEAD is asked again. The race cannot be
 * timed against a real gateway, so the store here answers in that order by script.
 */
import { expect, test } from "bun:test";
import { sizeOf } from "../../src/cli/user/transfer.ts";
import { StorageApiError } from "../../src/sdk/storage.ts";

type Store = Parameters<typeof sizeOf>[0];
const refused = (status: number, Description?: string) => new StorageApiError(status, Description ? { Description } : {});

function scripted(heads: (number | Error)[], get: Error | Response): Store & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    async sizeOf() {
      calls.push("HEAD");
      const next = heads.shift();
      if (next instanceof Error || next === undefined) throw next ?? new Error("no more HEADs scripted");
      return next;
    },
    async download() {
      calls.push("GET");
      if (get instanceof Error) throw get;
      return get;
    },
  };
}

test("the same refusal again: its words are the answer", async () => {
  const store = scripted([refused(403)], refused(403, "you may not read this file"));
  await expect(sizeOf(store, "ipfs", "bafy")).rejects.toThrow("you may not read this file");
  expect(store.calls).toEqual(["HEAD", "GET"]);
});

test("access granted between the HEAD and the GET: the HEAD is asked again and gives the size", async () => {
  const store = scripted([refused(403), 2102185], refused(402, "the voucher covers up to 0 bytes"));
  expect(await sizeOf(store, "ipfs", "bafy")).toBe(2102185);
  expect(store.calls).toEqual(["HEAD", "GET", "HEAD"]);
});

test("a refusal with words, or another failure, is not asked again", async () => {
  const worded = scripted([refused(404, "no such file")], new Response(""));
  await expect(sizeOf(worded, "dfs", "bafy")).rejects.toThrow("no such file");
  const broken = scripted([new Error("connection refused")], new Response(""));
  await expect(sizeOf(broken, "dfs", "bafy")).rejects.toThrow("connection refused");
  expect([worded.calls, broken.calls]).toEqual([["HEAD"], ["HEAD"]]);
});
