import { describe, expect, test } from "bun:test";
import { BlobError } from "../../src/blob/store.ts";
import { Failure } from "../../src/failure.ts";
import type { Queryable } from "../../src/db/sql.ts";
import type { Backend } from "../../src/storage/backend.ts";
import { CorruptChunkError, NotFoundError, StoppedError } from "../../src/storage/dfs/errors.ts";
import { storageFailure, withStorageErrors } from "../../src/storage/errors.ts";
import { IpfsError } from "../../src/storage/ipfs/errors.ts";

// The real error classes of both back-ends and the blob store, mapped in the one place that knows their codes.
describe("back-end failures as storage errors", () => {
  test.each([
    ["dfs: no such content", new NotFoundError("no dfs content x"), "not-found"],
    ["ipfs: no such content", new IpfsError("IPFS_NOT_FOUND", "no pinned content x"), "not-found"],
    ["ipfs: not a Cid", new IpfsError("IPFS_BAD_CID", "not a Cid"), "bad-input"],
    ["ipfs: range outside", new IpfsError("IPFS_BAD_RANGE", "range"), "bad-range"],
  ])("%s → %s", (_, err, code) => {
    const mapped = storageFailure(err);
    expect(mapped).toBeInstanceOf(Failure);
    expect((mapped as Failure).code).toBe(code as Failure["code"]);
  });

  test.each([
    ["dfs: damaged chunk", new CorruptChunkError("ab", "SHA-256 mismatch")],
    ["dfs: stopped", new StoppedError("dfs store is stopped")],
    ["ipfs: block missing", new IpfsError("IPFS_BLOCK_MISSING", "block x")],
    ["blob store unreachable", new BlobError("BlobStoreUnavailable", "connect ECONNREFUSED")],
    ["anything else", new Error("boom")],
  ])("%s stays itself: a logged 500 that tells the client nothing", (_, err) => {
    expect(storageFailure(err)).toBe(err);
  });

  test("a wrapped back-end maps what its calls and its streams throw", async () => {
    const raw: Backend = {
      kind: "dfs",
      capabilities: { delete: true },
      put: async () => {
        throw new StoppedError("stopped");
      },
      stat: async () => {
        throw new NotFoundError("gone");
      },
      read: () =>
        new ReadableStream({
          pull(c) {
            c.error(new IpfsError("IPFS_NOT_FOUND", "released while read"));
          },
        }),
      release: async () => {
        throw new IpfsError("IPFS_NOT_FOUND", "gone");
      },
      releaseIn: async () => {
        throw new NotFoundError("gone");
      },
      health: async () => ({ ok: true }),
      stop: async () => {},
    };
    const b = withStorageErrors(raw);
    await expect(b.put(new ReadableStream())).rejects.toBeInstanceOf(StoppedError);
    await expect(b.stat("x")).rejects.toMatchObject({ code: "not-found" });
    await expect(b.release("x")).rejects.toMatchObject({ code: "not-found" });
    await expect(b.releaseIn({} as Queryable, "x")).rejects.toMatchObject({ code: "not-found" });
    await expect(Bun.readableStreamToBytes(b.read("x"))).rejects.toMatchObject({ code: "not-found", message: "File not found" });
  });
});
