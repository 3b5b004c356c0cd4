/**
 * An app with the account API over a real SQLite file, a clock the test moves, and a mailer that
 * keeps what it sends: tests of /v2 call it through `app.handle()` like a client would.
 */
import type { AccountDeps } from "../../src/accounts/index.ts";
import type { Mail, Mailer } from "../../src/accounts/mailer.ts";
import { rememberClientIp } from "../../src/http/client-ip.ts";
import type { Logger } from "../../src/log.ts";
import { testApp, type Json } from "./app.ts";

export interface Clock {
  now: () => number;
  advance(ms: number): void;
  set(ms: number): void;
}

/** Starts at a fixed, recent instant so tokens and messages carry plausible times. */
export function testClock(start = Date.UTC(2026, 0, 1)): Clock {
  let t = start;
  return {
    now: () => t,
    advance(ms) {
      t += ms;
    },
    set(ms) {
      t = ms;
    },
  };
}

/** Keeps every mail; `fail` makes the next sends throw, as a dead SMTP relay would. */
export function memoryMailer() {
  const sent: Mail[] = [];
  const state = { fail: false };
  const mailer: Mailer = {
    async send(mail) {
      if (state.fail) throw new Error("relay refused");
      sent.push(mail);
    },
  };
  /** The code in the newest mail to `to`. */
  const lastCode = (to: string) => {
    const mail = sent.findLast((m) => m.to === to);
    const code = /\b(\d{6})\b/.exec(mail?.subject ?? "")?.[1];
    if (!code) throw new Error(`no code was mailed to ${to}`);
    return code;
  };
  return { mailer, sent, state, lastCode };
}

export interface Reply {
  status: number;
  headers: Headers;
  body: Json;
}

/**
 * `ip` is the client address the server sees, as the socket would have told it; without one, each
 * call comes from an address of its own, so only tests about per-IP limits meet them.
 */
export type Call = (method: string, path: string, opts?: { body?: unknown; headers?: Record<string, string>; ip?: string }) => Promise<Reply>;

export function accountsApp(opts: { env?: Record<string, string>; accounts?: Partial<AccountDeps>; clock?: Clock; log?: Logger } = {}) {
  const clock = opts.clock ?? testClock();
  const mail = memoryMailer();
  const made = testApp({ env: opts.env, log: opts.log, accounts: { now: clock.now, mailer: mail.mailer, ...opts.accounts } });
  let calls = 0;
  const call: Call = async (method, path, { body, headers = {}, ip } = {}) => {
    const init: RequestInit = { method, headers: { ...headers } };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)["content-type"] = "application/json";
    }
    const request = new Request(`http://stowage.test${path}`, init);
    rememberClientIp(request, ip ?? `client-${++calls}`);
    const res = await made.app.handle(request);
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
  };
  return { ...made, clock, mail, call };
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

export const ORIGIN = "http://localhost:8080";

/** Challenge, sign, log in: the whole EVM login of a key (or a smart wallet's signer). */
export async function evmLogin(
  call: Call,
  signer: { address: string; signMessage(args: { message: string }): Promise<string> },
  opts: { origin?: string; address?: string; wrap?: (signature: string) => string } = {},
): Promise<Reply> {
  const address = opts.address ?? signer.address;
  const challenge = await call("GET", `/v2/login/evm/challenge?address=${address}`, { headers: { origin: opts.origin ?? ORIGIN } });
  if (challenge.status !== 200) return challenge;
  const message = challenge.body.data as string;
  const signature = await signer.signMessage({ message });
  return call("POST", "/v2/login/evm", { body: { message, signature: opts.wrap ? opts.wrap(signature) : signature, source: "test" } });
}

/** The claims of a JWT, read without checking it (the test checks what the server put in). */
export const claimsOf = (jwt: string): Json => JSON.parse(Buffer.from(jwt.split(".")[1] ?? "", "base64url").toString());
