/**
 * An S3 API in process over a whole test gateway (anvil, this pass's database and blob store,
 * quota from the chain's records, keys minted through POST /v2/keys), on a real socket: what the
 * S3 API's behaviour suites beside api.test.ts share. Accounts get free quota and a key; requests
 * go through Bun's S3Client or are signed by hand with AWS's own signer, for what it does not send.
 */
import { afterAll } from "bun:test";
import { S3Client } from "bun";
import { createHash } from "node:crypto";
import { Sha256 } from "@aws-crypto/sha256-js";
import { SignatureV4 } from "@smithy/signature-v4";
import { findAccessKey } from "../../src/keys/index.ts";
import { keysClient } from "../../src/sdk/keys.ts";
import { startS3Api } from "../../src/s3api/index.ts";
import type { DirectStorage } from "../../src/storage/direct.ts";
import { granter } from "../quota/grants.ts";
import { BASE, testGateway } from "../support/storage.ts";

export const MiB = 1024 * 1024;

export type Minted = { accessKeyId: string; secretAccessKey: string };
export type SignedOptions = { query?: Record<string, string>; body?: string | Uint8Array; headers?: Record<string, string>; payload?: string; rawPath?: string };

/** What a gateway gives the S3 API: testGateway's result. */
type TestGateway = Awaited<ReturnType<typeof testGateway>>;

/** A request signed by hand to the S3 API at `base`; `rawPath` is sent as it is (percent-escapes the signer would not make). */
export async function signedAt(base: string, key: Minted, method: string, path: string, o: SignedOptions = {}): Promise<Response> {
  const url = new URL(path, base);
  const signer = new SignatureV4({ service: "s3", region: "us-east-1", credentials: key, sha256: Sha256, uriEscapePath: false });
  const body = o.body ?? "";
  const hash = o.payload ?? createHash("sha256").update(body).digest("hex");
  const pathname = o.rawPath ?? url.pathname;
  const req = await signer.sign({ method, protocol: "http:", hostname: url.hostname, port: Number(url.port), path: pathname, query: o.query ?? {}, headers: { host: url.host, "x-amz-content-sha256": hash, ...o.headers }, body });
  const qs = new URLSearchParams(o.query ?? {}).toString();
  return fetch(`${base}${pathname}${qs ? `?${qs}` : ""}`, { method, headers: req.headers as Record<string, string>, body: method === "GET" || method === "HEAD" ? undefined : body });
}

/**
 * The S3 API on a socket of its own over `gw`, through `direct` (default: the gateway's own,
 * as the server wires it), stopped after the file's tests; with a hand signer and Bun's client.
 */
export async function s3ApiOver(gw: TestGateway, o: { direct?: DirectStorage } = {}) {
  const direct = o.direct ?? gw.composed.direct;
  const s3 = await startS3Api({
    hostname: "127.0.0.1",
    port: 0,
    maxBody: gw.config.maxBody,
    log: gw.log,
    sql: gw.database.sql,
    chainId: gw.config.chainId,
    direct,
    findAccessKey: (id) => findAccessKey({ sql: gw.database.sql, secretsKey: gw.secrets.secretsKey, resolver: gw.resolver, chainId: gw.config.chainId }, id),
  });
  afterAll(() => s3.stop());
  const bucketClient = (key: Minted, bucket = "dfs") => new S3Client({ accessKeyId: key.accessKeyId, secretAccessKey: key.secretAccessKey, endpoint: s3.url, bucket, region: "us-east-1" });
  const signed = (key: Minted, method: string, path: string, o: SignedOptions = {}) => signedAt(s3.url, key, method, path, o);
  return { s3, direct, bucketClient, signed };
}

export async function s3Harness() {
  const gw = await testGateway({ quota: true });
  const grant = granter(gw.chain);
  const api = await s3ApiOver(gw);

  /** A new account with free quota and a read-write key for every bucket. */
  async function account() {
    const { account, client } = await gw.user();
    await grant(account.address, "space", 256 * MiB);
    await grant(account.address, "traffic", 1024 * MiB);
    const keys = keysClient({ baseUrl: BASE, store: client, fetch: gw.fetch });
    const key: Minted = await keys.create({ access: "rw", bucket: "*" });
    return { account, client, key };
  }

  return { gw, account, ...api };
}

export const codeIn = (xml: string) => /<Code>([^<]*)<\/Code>/.exec(xml)?.[1];
export const md5Hex = (b: Uint8Array | string) => createHash("md5").update(b).digest("hex");
