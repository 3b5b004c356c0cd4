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
import { createDirectStorage } from "../../src/storage/direct.ts";
import { granter } from "../quota/grants.ts";
import { BASE, testGateway } from "../support/storage.ts";

export const MiB = 1024 * 1024;

export type Minted = { accessKeyId: string; secretAccessKey: string };
export type SignedOptions = { query?: Record<string, string>; body?: string | Uint8Array; headers?: Record<string, string>; payload?: string; rawPath?: string };

export async function s3Harness() {
  const gw = await testGateway({ quota: true });
  const grant = granter(gw.chain);
  const direct = createDirectStorage({ sql: gw.database.sql, log: gw.log, maxBody: gw.config.maxBody, backends: gw.backends, meter: gw.quota?.meter });
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

  /** A new account with free quota and a read-write key for every bucket. */
  async function account() {
    const { account, client } = await gw.user();
    await grant(account.address, "space", 256 * MiB);
    await grant(account.address, "traffic", 1024 * MiB);
    const keys = keysClient({ baseUrl: BASE, store: client, fetch: gw.fetch });
    const key: Minted = await keys.create({ access: "rw", bucket: "*" });
    return { account, client, key };
  }

  const bucketClient = (key: Minted, bucket = "dfs") => new S3Client({ accessKeyId: key.accessKeyId, secretAccessKey: key.secretAccessKey, endpoint: s3.url, bucket, region: "us-east-1" });

  /** A request signed by hand; `rawPath` is sent as it is (percent-escapes the signer would not make). */
  async function signed(key: Minted, method: string, path: string, o: SignedOptions = {}): Promise<Response> {
    const url = new URL(path, s3.url);
    const signer = new SignatureV4({ service: "s3", region: "us-east-1", credentials: key, sha256: Sha256, uriEscapePath: false });
    const body = o.body ?? "";
    const hash = o.payload ?? createHash("sha256").update(body).digest("hex");
    const pathname = o.rawPath ?? url.pathname;
    const req = await signer.sign({ method, protocol: "http:", hostname: url.hostname, port: Number(url.port), path: pathname, query: o.query ?? {}, headers: { host: url.host, "x-amz-content-sha256": hash, ...o.headers }, body });
    const qs = new URLSearchParams(o.query ?? {}).toString();
    return fetch(`${s3.url}${pathname}${qs ? `?${qs}` : ""}`, { method, headers: req.headers as Record<string, string>, body: method === "GET" || method === "HEAD" ? undefined : body });
  }

  return { gw, s3, direct, account, bucketClient, signed };
}

export const codeIn = (xml: string) => /<Code>([^<]*)<\/Code>/.exec(xml)?.[1];
export const md5Hex = (b: Uint8Array | string) => createHash("md5").update(b).digest("hex");
