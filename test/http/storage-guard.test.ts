// The storage guard's remembered DIDs (every storage and quota request parsed its token's
// DID again): a DID is parsed once and its parse handed out again; a bad one throws every time.
import { describe, expect, test } from "bun:test";
import { rememberedDids } from "../../src/http/storage-guard.ts";
import { InvalidDid, parseDid } from "../../src/identity/did.ts";

const CHAIN = 985;
const ADDRESS = "0x7e5f4552091a69125d5dfcb7b8c2659029395bdf";

describe("rememberedDids", () => {
  test("parses a DID once and answers what the parse answered", () => {
    let parses = 0;
    const read = rememberedDids((did) => (parses++, parseDid(did, CHAIN)));
    const first = read(`did:ethr:${ADDRESS}`);
    expect(first).toEqual(parseDid(`did:ethr:${ADDRESS}`, CHAIN));
    expect(read(`did:ethr:${ADDRESS}`)).toBe(first);
    expect(parses).toBe(1);
    // Another spelling is another key: parsed on its own, to the same canonical DID.
    expect(read(`did:ethr:0x3d9:${ADDRESS.toUpperCase().replace("0X", "0x")}`).canonical).toBe(first.canonical);
    expect(parses).toBe(2);
  });

  test("a DID that fails to parse is not kept: it throws on every call", () => {
    let parses = 0;
    const read = rememberedDids((did) => (parses++, parseDid(did, CHAIN)));
    for (let i = 0; i < 3; i++) expect(() => read("did:ethr:0xnot-an-address")).toThrow(InvalidDid);
    expect(() => read(`did:ethr:0x1:${ADDRESS}`)).toThrow(InvalidDid);
    expect(parses).toBe(4);
  });

  test("keeps at most 4,096 DIDs, then starts over", () => {
    let parses = 0;
    const read = rememberedDids((did) => (parses++, did.length));
    for (let i = 0; i < 4096; i++) read(`d${i}`);
    read("d0");
    expect(parses).toBe(4096);
    read("d4096"); // the 4,097th: the map starts over with it
    read("d0");
    expect(parses).toBe(4098);
  });
});
