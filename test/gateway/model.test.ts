/**
 * What a request asks of the trustless gateway (src/gateway/model.ts): the format query over the
 * Accept header, the car-* queries over the Accept parameters, q-values, and the requests that
 * are no trustless request at all (they stay downloads).
 */
import { describe, expect, test } from "bun:test";
import { StorageError } from "../../src/http/errors.ts";
import { trustlessRequest } from "../../src/gateway/model.ts";

const status = (accept: string | null, query: Record<string, string> = {}) => {
  try {
    trustlessRequest(accept, query);
    return 200;
  } catch (err) {
    if (err instanceof StorageError) return err.status;
    throw err;
  }
};

describe("trustlessRequest", () => {
  test("no trustless type nor format: a download", () => {
    for (const accept of [null, "", "*/*", "application/json", "text/html,application/xhtml+xml,*/*;q=0.8", "application/vnd.ipld.raw;q=0", "application/octet-stream"]) {
      expect(trustlessRequest(accept, {})).toBeUndefined();
    }
  });

  test("raw and car, by Accept or by format (format wins)", () => {
    expect(trustlessRequest("application/vnd.ipld.raw", {})).toEqual({ format: "raw", fromQuery: false });
    expect(trustlessRequest(null, { format: "raw" })).toEqual({ format: "raw", fromQuery: true });
    expect(trustlessRequest("application/vnd.ipld.car", { format: "raw" })).toEqual({ format: "raw", fromQuery: true });
    expect(trustlessRequest("application/vnd.ipld.raw", { format: "car" })).toEqual({ format: "car", fromQuery: true, dups: "n", scope: "all", entityBytes: undefined });
    expect(trustlessRequest("Application/VND.ipld.CAR; Version=1; order=unk", {})).toMatchObject({ format: "car", dups: "n" });
  });

  test("the highest q that we serve is chosen", () => {
    expect(trustlessRequest("application/vnd.ipld.raw;q=0.2, application/vnd.ipld.car;q=0.9", {})).toMatchObject({ format: "car" });
    expect(trustlessRequest("application/vnd.ipld.car;version=2, application/vnd.ipld.raw;q=0.1", {})).toMatchObject({ format: "raw" });
    expect(trustlessRequest('application/vnd.ipld.car; dups="y"', {})).toMatchObject({ format: "car", dups: "y" });
  });

  test("car-* queries win over the Accept parameters", () => {
    expect(trustlessRequest("application/vnd.ipld.car; dups=n", { format: "car", "car-dups": "y" })).toMatchObject({ dups: "y" });
    expect(trustlessRequest("application/vnd.ipld.car; order=weird", { "car-order": "dfs" })).toMatchObject({ format: "car" });
    expect(status(null, { format: "car", "car-version": "2" })).toBe(406);
  });

  test("entity-bytes implies dag-scope=entity; bad values are 400", () => {
    expect(trustlessRequest(null, { format: "car", "dag-scope": "all", "entity-bytes": "-10:*" })).toMatchObject({ scope: "entity", entityBytes: { from: -10, to: "*" } });
    expect(trustlessRequest(null, { format: "car", "dag-scope": "block" })).toMatchObject({ scope: "block" });
    for (const bad of ["", "1", "1:2:3", "x:1", "1:y", "5:2", "1.5:2"]) expect(status(null, { format: "car", "entity-bytes": bad })).toBe(400);
    expect(status(null, { format: "car", "dag-scope": "none" })).toBe(400);
    // Raw blocks have no scope: the parameters do not apply.
    expect(trustlessRequest(null, { format: "raw", "dag-scope": "none" })).toEqual({ format: "raw", fromQuery: true });
  });

  test("formats of the path gateway we do not produce are 406; unknown ones 400", () => {
    for (const format of ["tar", "dag-json", "dag-cbor", "json", "cbor", "ipns-record"]) expect(status(null, { format })).toBe(406);
    expect(status("application/x-tar", {})).toBe(406);
    expect(status("application/vnd.ipfs.ipns-record", {})).toBe(406);
    expect(status(null, { format: "zip" })).toBe(400);
  });
});
