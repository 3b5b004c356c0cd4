/**
 * ERC-5573 ReCaps (src/sdk/recap.ts): the ERC's own example round-trips (its URI, its details
 * object, its translated statement), and the decoder refuses what the ERC does not allow, since
 * the gateway reads a session grant's rights from it.
 */
import { describe, expect, test } from "bun:test";
import { base64urlnopad } from "@scure/base";
import { decodeRecap, encodeRecap, RecapError, recapStatement } from "../../src/sdk/recap.ts";

// The ERC's example of a ReCap Details Object, its URI and its statement (Specification section).
const ERC_DETAILS = {
  att: {
    "https://example.com/pictures/": { "crud/delete": [{}], "crud/update": [{}], "other/action": [{}] },
    "mailto:username@example.com": {
      "msg/receive": [{ max_count: 5, templates: ["newsletter", "marketing"] }],
      "msg/send": [{ to: "someone@email.com" }, { to: "joe@email.com" }],
    },
  },
  prf: ["zdj7Wj6FNS4rUUbsiJvjjxcsNqZdDCSiYR8sKQXfoPfpSZuAw"],
};
const ERC_URI =
  "urn:recap:eyJhdHQiOnsiaHR0cHM6Ly9leGFtcGxlLmNvbS9waWN0dXJlcy8iOnsiY3J1ZC9kZWxldGUiOlt7fV0sImNydWQvdXBkYXRlIjpbe31dLCJvdGhlci9hY3Rpb24iOlt7fV19LCJtYWlsdG86dXNlcm5hbWVAZXhhbXBsZS5jb20iOnsibXNnL3JlY2VpdmUiOlt7Im1heF9jb3VudCI6NSwidGVtcGxhdGVzIjpbIm5ld3NsZXR0ZXIiLCJtYXJrZXRpbmciXX1dLCJtc2cvc2VuZCI6W3sidG8iOiJzb21lb25lQGVtYWlsLmNvbSJ9LHsidG8iOiJqb2VAZW1haWwuY29tIn1dfX0sInByZiI6WyJ6ZGo3V2o2Rk5TNHJVVWJzaUp2amp4Y3NOcVpkRENTaVlSOHNLUVhmb1BmcFNadUF3Il19";
const ERC_STATEMENT =
  "I further authorize the stated URI to perform the following actions on my behalf: (1) 'crud': 'delete', 'update' for 'https://example.com/pictures/'. (2) 'other': 'action' for 'https://example.com/pictures/'. (3) 'msg': 'receive', 'send' for 'mailto:username@example.com'.";

const raw = (json: string) => `urn:recap:${base64urlnopad.encode(new TextEncoder().encode(json))}`;

describe("ReCaps", () => {
  test("the ERC's example: its URI decodes to its details object, which encodes to its URI and translates to its statement", () => {
    expect(decodeRecap(ERC_URI)).toEqual(ERC_DETAILS);
    expect(encodeRecap(ERC_DETAILS.att, ERC_DETAILS.prf)).toBe(ERC_URI);
    expect(recapStatement(ERC_DETAILS.att)).toBe(ERC_STATEMENT);
  });

  test("encoding puts resources and abilities in the ERC's order, whatever order they came in", () => {
    const uri = encodeRecap({ "z:last": { "b/two": [{}], "a/one": [{}] }, "a:first": { "x/y": [{}] } });
    expect(JSON.stringify(decodeRecap(uri).att)).toBe('{"a:first":{"x/y":[{}]},"z:last":{"a/one":[{}],"b/two":[{}]}}');
  });

  test("the decoder refuses what the ERC does not allow", () => {
    const refused: [string, RegExp][] = [
      ["urn:other:abc", /not a urn:recap/],
      ["urn:recap:!!!", /base64url/],
      [raw("[1]"), /not a JSON object/],
      [raw('{"att":{}}'), /names no resource/],
      [raw('{"att":{"b:x":{"a/b":[{}]},"a:x":{"a/b":[{}]}}}'), /lexicographic/],
      [raw('{"att":{"a:x":{"z/b":[{}],"a/b":[{}]}}}'), /lexicographic/],
      [raw('{"att":{"no-scheme":{"a/b":[{}]}}}'), /not a resource URI/],
      [raw('{"att":{"a:x":{"ab":[{}]}}}'), /not an ability string/],
      [raw('{"att":{"a:x":{"a/b":[1]}}}'), /array of objects/],
      [raw('{"att":{"a:x":{"a/b":[{}]}},"prf":[]}'), /prf/],
      [raw('{"att":{"a:x":{"a/b":[{}]}},"extra":1}'), /does not define: extra/],
    ];
    for (const [uri, why] of refused) {
      const err = (() => {
        try {
          decodeRecap(uri);
        } catch (e) {
          return e;
        }
      })();
      expect({ uri, err: err instanceof RecapError ? err.message : String(err) }).toEqual({ uri, err: expect.stringMatching(why) });
    }
  });
});
