/**
 * EIP-4361 (Sign-In with Ethereum) messages read field by field (D14): a wallet library rebuilds
 * the challenge from its fields, and its text may differ from ours in ways that do not change
 * them (a domain line with or without the scheme, CRLF line endings, how a statement-less message
 * is spaced). The login therefore compares fields, never bytes. The parser is strict otherwise:
 * every line must be one the grammar allows, in its order, and nothing may follow.
 */
import { getAddress, isAddress, type Address } from "viem";

export interface SiweFields {
  /** Absent when the domain line has none (EIP-4361 then means https). */
  scheme?: string;
  domain: string;
  address: Address;
  statement?: string;
  uri: string;
  version: string;
  chainId: number;
  nonce: string;
  /** Instants in epoch milliseconds. */
  issuedAt: number;
  expirationTime?: number;
  notBefore?: number;
  requestId?: string;
  resources: string[];
}

const PREAMBLE = / wants you to sign in with your Ethereum account:$/;
const SCHEME_DOMAIN = /^(?:([a-zA-Z][a-zA-Z0-9+.-]*):\/\/)?([^\s/?#]+)$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const NONCE = /^[a-zA-Z0-9]{8,}$/;
const CHAIN_ID = /^[1-9]\d{0,15}$/;
/** RFC 3339 date-time, as EIP-4361 requires (JS Date alone would take many other forms). */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

function instant(value: string): number | undefined {
  if (!DATE_TIME.test(value)) return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

/** The fields of an EIP-4361 message, or undefined when it is not one. */
export function parseSiwe(message: string): SiweFields | undefined {
  // CRLF everywhere or LF everywhere; a stray CR is not a line ending.
  const crlf = message.includes("\r\n");
  if (crlf && /(?<!\r)\n/.test(message)) return undefined;
  const text = (crlf ? message.replaceAll("\r\n", "\n") : message).replace(/\n$/, "");
  if (text.includes("\r")) return undefined;
  const lines = text.split("\n");
  let i = 0;
  const next = () => lines[i++];

  const first = next() ?? "";
  if (!PREAMBLE.test(first)) return undefined;
  const origin = SCHEME_DOMAIN.exec(first.replace(PREAMBLE, ""));
  const address = next();
  if (!origin?.[2] || !address || !ADDRESS.test(address) || !isAddress(address)) return undefined;
  if (next() !== "") return undefined;

  // A statement is its own paragraph. Without one, EIP-4361 puts two blank lines before the
  // URI and some libraries one: both read as "no statement".
  let statement: string | undefined;
  if (lines[i] === "") i++;
  else if (!lines[i]?.startsWith("URI: ")) {
    statement = next();
    if (next() !== "") return undefined;
  }

  /** The value of the line `name: value` if it is the next line; each field has its place. */
  const field = (name: string): string | undefined => {
    const line = lines[i];
    if (!line?.startsWith(`${name}: `)) return undefined;
    i++;
    return line.slice(name.length + 2);
  };
  const uri = field("URI");
  const version = field("Version");
  const chainId = field("Chain ID");
  const nonce = field("Nonce");
  const issuedAt = field("Issued At");
  if (!uri || version !== "1" || !chainId || !CHAIN_ID.test(chainId) || !nonce || !NONCE.test(nonce) || !issuedAt) return undefined;
  const expiration = field("Expiration Time");
  const notBefore = field("Not Before");
  const requestId = field("Request ID");
  const resources: string[] = [];
  if (lines[i] === "Resources:") {
    i++;
    while (lines[i]?.startsWith("- ")) resources.push((next() as string).slice(2));
  }
  if (i !== lines.length) return undefined;

  const times = { issuedAt: instant(issuedAt), expirationTime: expiration === undefined ? undefined : instant(expiration), notBefore: notBefore === undefined ? undefined : instant(notBefore) };
  if (times.issuedAt === undefined || (expiration !== undefined && times.expirationTime === undefined) || (notBefore !== undefined && times.notBefore === undefined)) return undefined;

  return {
    ...(origin[1] ? { scheme: origin[1].toLowerCase() } : {}),
    domain: origin[2].toLowerCase(),
    address: getAddress(address),
    ...(statement !== undefined ? { statement } : {}),
    uri,
    version,
    chainId: Number(chainId),
    nonce,
    issuedAt: times.issuedAt,
    ...(times.expirationTime !== undefined ? { expirationTime: times.expirationTime } : {}),
    ...(times.notBefore !== undefined ? { notBefore: times.notBefore } : {}),
    ...(requestId !== undefined ? { requestId } : {}),
    resources,
  };
}

/** Which part of a signed message differs from the issued one, first by what the answer names. */
export type SiweMismatch = "chain" | "domain" | "address" | "other";

export function siweMismatch(issued: SiweFields, signed: SiweFields): SiweMismatch | undefined {
  if (signed.chainId !== issued.chainId) return "chain";
  // Without a scheme the message means the issued one's: "with or without the scheme" (D14).
  if (signed.domain !== issued.domain || (signed.scheme !== undefined && signed.scheme !== issued.scheme) || signed.uri !== issued.uri) return "domain";
  if (signed.address !== issued.address) return "address";
  const same =
    signed.statement === issued.statement &&
    signed.version === issued.version &&
    signed.nonce === issued.nonce &&
    signed.issuedAt === issued.issuedAt &&
    signed.expirationTime === issued.expirationTime &&
    signed.notBefore === issued.notBefore &&
    signed.requestId === issued.requestId &&
    signed.resources.length === issued.resources.length &&
    signed.resources.every((r, k) => r === issued.resources[k]);
  return same ? undefined : "other";
}
