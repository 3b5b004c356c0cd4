/**
 * The Pinning Service API against its own OpenAPI document (ipfs-pinning-service.yaml, read here,
 * not restated): every operation and every status code the document lists is either answered by a
 * case below, its body checked against the document's schema for that answer, or named as one this
 * service never gives for that operation, with why. A document with an operation or a status that
 * neither covers fails the test.
 */
import { describe, expect, test } from "bun:test";
import { Elysia } from "elysia";
import { load } from "js-yaml";
import { errorHandler } from "../../src/http/error-handler.ts";
import { createPins, pinsErrorEdge, pinsRoutes } from "../../src/pins/index.ts";
import { keysClient } from "../../src/sdk/keys.ts";
import { parseDidOrAddress } from "../../src/identity/did.ts";
import type { IpfsBackend } from "../../src/storage/ipfs/index.ts";
import { BASE, testGateway } from "../support/storage.ts";
import { granter } from "../quota/grants.ts";
import { PSA_SPEC } from "./support.ts";

type Schema = Record<string, unknown>;
// any: the document as parsed YAML, whose shapes are the OpenAPI format's, walked by hand below.
type Doc = any;
const doc: Doc = load(await Bun.file(PSA_SPEC).text());

/** Resolves a local `$ref` of the document. */
function deref(s: Schema): Doc {
  let out = s;
  while (typeof out.$ref === "string") out = (out.$ref as string).slice(2).split("/").reduce((o: Doc, k) => o[k], doc);
  return out;
}

/** What is wrong with `value` under the document's `schema` (the keywords it uses). */
function check(value: unknown, raw: Schema, at = "$"): string[] {
  const s = deref(raw);
  const errs: string[] = [];
  const type = s.type as string | undefined;
  if (type === "object") {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return [`${at}: not an object`];
    const obj = value as Record<string, unknown>;
    for (const k of (s.required as string[] | undefined) ?? []) if (!(k in obj)) errs.push(`${at}.${k}: missing`);
    const props = (s.properties ?? {}) as Record<string, Schema>;
    for (const [k, v] of Object.entries(obj)) {
      if (props[k]) errs.push(...check(v, props[k], `${at}.${k}`));
      else if (typeof s.additionalProperties === "object") errs.push(...check(v, s.additionalProperties as Schema, `${at}.${k}`));
    }
  } else if (type === "array") {
    if (!Array.isArray(value)) return [`${at}: not an array`];
    if (typeof s.minItems === "number" && value.length < s.minItems) errs.push(`${at}: fewer than ${s.minItems} items`);
    if (typeof s.maxItems === "number" && value.length > s.maxItems) errs.push(`${at}: more than ${s.maxItems} items`);
    if (s.uniqueItems && new Set(value.map((v) => JSON.stringify(v))).size !== value.length) errs.push(`${at}: items not unique`);
    value.forEach((v, i) => errs.push(...check(v, s.items as Schema, `${at}[${i}]`)));
  } else if (type === "string") {
    if (typeof value !== "string") return [`${at}: not a string`];
    if (Array.isArray(s.enum) && !s.enum.includes(value)) errs.push(`${at}: ${value} not in ${s.enum}`);
    if (typeof s.maxLength === "number" && value.length > s.maxLength) errs.push(`${at}: longer than ${s.maxLength}`);
    if (s.format === "date-time" && !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(value)) errs.push(`${at}: not an RFC 3339 date-time`);
  } else if (type === "integer") {
    if (!Number.isInteger(value)) return [`${at}: not an integer`];
    if (typeof s.minimum === "number" && (value as number) < s.minimum) errs.push(`${at}: below ${s.minimum}`);
  }
  return errs;
}

// ---- the gateway, an account with space and one without, and a service of our own for the rest

const gw = await testGateway({ quota: true, env: { STOWAGE_PIN_ORIGINS: "any" } });
const grant = granter(gw.chain);
const chainId = gw.chain.context.chain.id;

async function account(space: number) {
  const { account, client } = await gw.user();
  if (space > 0) await grant(account.address, "space", space);
  const minted = await keysClient({ baseUrl: BASE, store: client, fetch: gw.fetch }).create({ scope: "pins" });
  return { token: minted.token as string, did: parseDidOrAddress(account.address, chainId) };
}
const rich = await account(1024 * 1024);
const broke = await account(0);

/** The same service, no worker: a queue of one (the custom 429), or no ipfs back-end (503). */
function app(o: { pinQueue: number; ipfs: boolean }) {
  const pins = createPins({
    sql: gw.database.sql,
    log: gw.log,
    chainId,
    findToken: gw.keys.findPins,
    storage: gw.composed.direct,
    ipfs: () => (o.ipfs ? (gw.backends.ipfs as IpfsBackend) : undefined),
    holder: "contract",
    settings: { pinTimeout: 60_000, pinQueue: o.pinQueue, pinOrigins: "public" },
  });
  return new Elysia().use(errorHandler(gw.log, [pinsErrorEdge])).use(pinsRoutes(pins));
}
const queueOfOne = app({ pinQueue: 1, ipfs: true });
const noIpfs = app({ pinQueue: 100, ipfs: false });
const queueAccount = await account(1024 * 1024);
const noIpfsAccount = await account(1024 * 1024);

const CID_A = "bafkreihwsnuregceqh263vgdathcprnbvatyat6h6mu7ipjhhodcdbyhoy";
const LONG_ID = "x".repeat(65);

type Handler = { handle(r: Request): Promise<Response> };
function call(o: { token?: string; method: string; path: string; body?: unknown; raw?: string; via?: Handler }) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`;
  const body = o.raw ?? (o.body === undefined ? undefined : JSON.stringify(o.body));
  // As a socket's request has it (an in-process Request does not set it).
  if (body !== undefined) headers["content-length"] = String(Buffer.byteLength(body));
  return (o.via ?? gw.app).handle(new Request(`${BASE}/psa${o.path}`, { method: o.method, headers, body }));
}
const add = async (token: string, via?: Handler) => ((await (await call({ token, method: "POST", path: "/pins", body: { cid: CID_A }, via })).json()) as { requestid: string }).requestid;

type Case = () => Promise<Response>;
/** operationId → status (as the document writes it) → the request that answers it, or why none does. */
const CASES: Record<string, Record<string, Case | { never: string }>> = {
  getPins: {
    "200": () => call({ token: rich.token, method: "GET", path: "/pins?status=queued,pinning,pinned,failed&limit=5" }),
    "400": () => call({ token: rich.token, method: "GET", path: "/pins?limit=0" }),
    "401": () => call({ method: "GET", path: "/pins" }),
    "404": { never: "a list of no matches is an empty list" },
    "409": { never: "listing spends nothing" },
    "4XX": { never: "listing has no failure beyond bad input and a bad token" },
    "5XX": { never: "listing needs only the database" },
  },
  addPin: {
    "202": () => call({ token: rich.token, method: "POST", path: "/pins", body: { cid: CID_A, name: "contract.bin", meta: { k: "v" } } }),
    "400": () => call({ token: rich.token, method: "POST", path: "/pins", body: { cid: "not-a-cid" } }),
    "401": () => call({ token: "STWAAAAAAAAAAAAAAAAA.nope", method: "POST", path: "/pins", body: { cid: CID_A } }),
    "404": { never: "adding names no resource that could be missing" },
    "409": () => call({ token: broke.token, method: "POST", path: "/pins", body: { cid: CID_A } }),
    "4XX": async () => {
      await add(queueAccount.token, queueOfOne);
      return call({ token: queueAccount.token, method: "POST", path: "/pins", body: { cid: CID_A }, via: queueOfOne });
    },
    "5XX": () => call({ token: noIpfsAccount.token, method: "POST", path: "/pins", body: { cid: CID_A }, via: noIpfs }),
  },
  getPinByRequestId: {
    "200": async () => call({ token: rich.token, method: "GET", path: `/pins/${await add(rich.token)}` }),
    "400": () => call({ token: rich.token, method: "GET", path: `/pins/${LONG_ID}` }),
    "401": () => call({ method: "GET", path: "/pins/anything" }),
    "404": () => call({ token: rich.token, method: "GET", path: `/pins/${crypto.randomUUID()}` }),
    "409": { never: "reading spends nothing" },
    "4XX": { never: "reading has no failure beyond bad input, a bad token and an unknown id" },
    "5XX": { never: "reading needs only the database" },
  },
  replacePinByRequestId: {
    "202": async () => call({ token: rich.token, method: "POST", path: `/pins/${await add(rich.token)}`, body: { cid: CID_A, name: "replaced.bin" } }),
    "400": async () => call({ token: rich.token, method: "POST", path: `/pins/${await add(rich.token)}`, body: { name: "no cid" } }),
    "401": () => call({ method: "POST", path: "/pins/anything", body: { cid: CID_A } }),
    "404": () => call({ token: rich.token, method: "POST", path: `/pins/${crypto.randomUUID()}`, body: { cid: CID_A } }),
    "409": () => call({ token: broke.token, method: "POST", path: `/pins/${crypto.randomUUID()}`, body: { cid: CID_A } }),
    "4XX": { never: "a replacement takes its request's place in the queue: it never finds the queue full" },
    "5XX": async () => call({ token: noIpfsAccount.token, method: "POST", path: "/pins/anything", body: { cid: CID_A }, via: noIpfs }),
  },
  deletePinByRequestId: {
    "202": async () => call({ token: rich.token, method: "DELETE", path: `/pins/${await add(rich.token)}` }),
    "400": () => call({ token: rich.token, method: "DELETE", path: `/pins/${LONG_ID}` }),
    "401": () => call({ method: "DELETE", path: "/pins/anything" }),
    "404": () => call({ token: rich.token, method: "DELETE", path: `/pins/${crypto.randomUUID()}` }),
    "409": { never: "removing spends nothing" },
    "4XX": { never: "removing has no failure beyond bad input, a bad token and an unknown id" },
    "5XX": { never: "removing needs only the database" },
  },
};

const operations: { id: string; method: string; path: string; responses: Record<string, Doc> }[] = [];
for (const [path, item] of Object.entries(doc.paths as Record<string, Doc>))
  for (const method of ["get", "post", "put", "patch", "delete"]) if (item[method]) operations.push({ id: item[method].operationId, method, path, responses: item[method].responses });

test("the table covers every operation and status code of the document, and nothing else", () => {
  expect(operations.map((o) => o.id).sort()).toEqual(Object.keys(CASES).sort());
  for (const o of operations) expect({ op: o.id, statuses: Object.keys(o.responses).sort() }).toEqual({ op: o.id, statuses: Object.keys(CASES[o.id] ?? {}).sort() });
  expect(doc.components.securitySchemes.accessToken).toMatchObject({ type: "http", scheme: "bearer" });
});

for (const o of operations) {
  describe(`${o.method.toUpperCase()} ${o.path} (${o.id})`, () => {
    for (const [status, answer] of Object.entries(o.responses)) {
      const c = CASES[o.id]?.[status];
      if (!c || !("call" in c || typeof c === "function")) continue;
      test(`answers ${status} in the document's shape`, async () => {
        const res = await (c as Case)();
        const listed = Object.keys(o.responses).filter((s) => /^\d+$/.test(s)).map(Number);
        if (status === "4XX") expect({ client: res.status >= 400 && res.status < 500, listed: listed.includes(res.status) }).toEqual({ client: true, listed: false });
        else if (status === "5XX") expect(res.status).toBeGreaterThanOrEqual(500);
        else expect(res.status).toBe(Number(status));
        const schema = deref(answer).content?.["application/json"]?.schema;
        if (!schema) {
          expect(await res.text()).toBe("");
          return;
        }
        expect(res.headers.get("content-type")).toStartWith("application/json");
        const body: Doc = await res.json();
        expect({ status, errors: check(body, schema) }).toEqual({ status, errors: [] });
        // The document's examples name the reason of each error response; ours say the same.
        const example = Object.values(deref(answer).examples ?? {})[0] as Doc;
        const reason = example ? deref(example).value?.error?.reason : undefined;
        if (reason && !["CUSTOM_ERROR_CODE_FOR_MACHINES", "INTERNAL_SERVER_ERROR"].includes(reason)) expect(body.error.reason).toBe(reason);
      });
    }
  });
}

test("an unknown path under /psa answers in the document's error shape", async () => {
  const res = await call({ token: rich.token, method: "GET", path: "/nope" });
  expect(res.status).toBe(404);
  expect(check(await res.json(), doc.components.schemas.Failure)).toEqual([]);
});

test("a body past the gateway's 64 KiB for parsed bodies answers 413 in the document's error shape", async () => {
  const res = await call({ token: rich.token, method: "POST", path: "/pins", raw: JSON.stringify({ cid: CID_A, meta: { big: "x".repeat(70_000) } }) });
  expect(res.status).toBe(413);
  const body: Doc = await res.json();
  expect(check(body, doc.components.schemas.Failure)).toEqual([]);
  expect(body.error.reason).toBe("CONTENT_TOO_LARGE");
});
