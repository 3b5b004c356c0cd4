/**
 * EVM wallet login (DESIGN.md D12): an EIP-4361 challenge for an allowed `Origin`, then a login
 * with the signed message. The nonce is single use (one conditional update spends it, whichever
 * gateway races, D16), bound to the address and kept in the shared database; every
 * field of the signed message must equal the challenge issued for that nonce (D14: fields, not
 * bytes, since wallet libraries rebuild the text; see siwe.ts). Signatures are checked for
 * plain keys locally and for smart wallets (EIP-1271, undeployed ERC-6492) on the chain, with a
 * gas and time cap. The account is the address: uid = EIP-55 address, did = did:ethr:<chain>:<address>
 * (or the account the wallet was linked to, link.ts), and only while the registry lets the address
 * sign for that DID (D21): once the DID has another owner, the address is a stranger to it and to
 * its account, and the sign-in is refused, as the DID login (POST /login) refuses it.
 *
 * Linking a wallet to an account (link.ts) runs the same round with a statement of its own that
 * names the account: a challenge issued for one purpose is refused for the other, so a sign-in
 * signature never links a wallet and a link signature never signs in.
 */
import { getAddress, isAddress, isHex, verifyMessage as verifyEoaMessage, type Address, type Hex } from "viem";
import { createSiweMessage, generateSiweNonce } from "viem/siwe";
import { fail } from "./error-codes.ts";
import { enforce } from "./limits.ts";
import type { ClientKey } from "../http/client-key.ts";
import { parseSiwe, siweMismatch } from "./siwe.ts";
import type { TokenService } from "./tokens.ts";
import type { UserService } from "./users.ts";
import type { ClientInfo, Ctx, SignatureVerifier, TokenPair } from "./types.ts";
import { canonicalDid } from "../identity/did.ts";
import type { DidResolver } from "../identity/resolver.ts";

export const CHALLENGE_TTL_MS = 10 * 60_000;
/** A smart wallet's check is one eth_call; a chain slower than this is treated as down. */
export const VERIFY_TIMEOUT_MS = 10_000;
/** Gas for that call: ample for a wallet's isValidSignature plus an ERC-6492 deployment. */
export const VERIFY_GAS = 5_000_000n;
/** Spent nonces are kept a day after expiry, so a late replay still reads "used" and not "unknown". */
const NONCE_RETENTION_MS = 24 * 60 * 60_000;
/** The sign-in's statement: what the wallet shows the user it is agreeing to. */
export const SIGN_IN_STATEMENT = "Sign in to Stowage with this wallet.";

const SWEEP_NONCES = "DELETE FROM siwe_nonces WHERE expires_at < $1";
const INSERT_NONCE = "INSERT INTO siwe_nonces (nonce, address, chain_id, message, issued_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)";
const FIND_NONCE = `SELECT nonce, address, message, expires_at AS "expiresAt", used_at AS "usedAt" FROM siwe_nonces WHERE nonce = $1`;
const SPEND_NONCE = "UPDATE siwe_nonces SET used_at = $2 WHERE nonce = $1 AND used_at IS NULL";

export interface EvmLogin extends TokenPair {
  did: string;
  number: string;
}

export interface ChallengeInput {
  address: string;
  chainid?: number | undefined;
  origin: string | null;
}

export interface EvmService {
  challenge(input: ChallengeInput, from: ClientKey): Promise<string>;
  login(input: { message: string; signature: string } & ClientInfo, from: ClientKey): Promise<EvmLogin>;
}

/**
 * One EIP-4361 round: a challenge issued with a statement, and the proof that its address signed
 * it. The sign-in and the wallet link (link.ts) each use it with their own statement.
 */
export interface SiweRound {
  /** The message for `address` to sign, with `statement`; its nonce is kept for one use. */
  issue(input: ChallengeInput, statement: string, from: ClientKey): Promise<string>;
  /**
   * The address that signed `message`, and its DID: the message must be, field by field, a
   * challenge issued with `statement` (unused, unexpired; this spends it), signed by its address,
   * which the registry still lets sign for its own DID.
   */
  prove(message: string, signature: string, statement: string): Promise<{ address: Address; did: string }>;
}

/** D2: `did:ethr:0x3d9:<EIP-55 address>`, chain id in lower-case hex. */
export const didFor = (chainId: number, address: Address) => canonicalDid(address, chainId);

/** `scheme://host[:port]` of an origin (or a page URL), or undefined when it is none. */
export function originOf(raw: string | null | undefined): string | undefined {
  if (!raw) return undefined;
  try {
    const url = new URL(raw);
    return url.origin === "null" ? undefined : url.origin;
  } catch {
    return undefined;
  }
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T | "timeout"> {
  let timer: Timer | undefined;
  const timeout = new Promise<"timeout">((ok) => {
    timer = setTimeout(() => ok("timeout"), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Whether `signature` is `address`'s signature of the EIP-4361 `message`: a plain key locally, a
 * smart wallet (EIP-1271, undeployed ERC-6492) with one capped call on the chain. A chain that does
 * not answer is CHAIN_UNAVAILABLE, not a wrong signature. Session grants (src/grants) check theirs
 * with it too.
 */
export async function siweSignatureValid(deps: { publicClient?: SignatureVerifier | undefined; log: Ctx["log"] }, address: Address, message: string, signature: Hex): Promise<boolean> {
  const { log } = deps;
  // A plain key needs no chain; only a signature that is not the address's own key goes on chain.
  if (await verifyEoaMessage({ address, message, signature }).catch(() => false)) return true;
  if (!deps.publicClient) return false;
  const args = { address, message, signature, gas: VERIFY_GAS };
  const verdict = await withTimeout(deps.publicClient.verifyMessage(args), VERIFY_TIMEOUT_MS).catch((err: unknown) => {
    log.warn("smart wallet signature check failed", { address, err: (err as Error).message });
    throw fail("CHAIN_UNAVAILABLE");
  });
  if (verdict === "timeout") throw fail("CHAIN_UNAVAILABLE");
  if (!verdict) {
    const alive = await withTimeout(deps.publicClient.getChainId(), VERIFY_TIMEOUT_MS).catch(() => "down" as const);
    if (alive === "down" || alive === "timeout") throw fail("CHAIN_UNAVAILABLE");
  }
  return verdict;
}

export function createSiweRound(ctx: Ctx, deps: { resolver: DidResolver; publicClient?: SignatureVerifier | undefined }): SiweRound {
  const { config, sql, now, limits, log } = ctx;
  const allowed = new Set(config.allowedOrigins.map(originOf).filter((o): o is string => o !== undefined));

  const signatureIsValid = (address: Address, message: string, signature: Hex) => siweSignatureValid({ publicClient: deps.publicClient, log }, address, message, signature);

  return {
    async issue({ address, chainid, origin }, statement, from) {
      if (!origin) throw fail("ORIGIN_MISSING");
      const uri = originOf(origin);
      if (!uri || !allowed.has(uri)) throw fail("ORIGIN_NOT_ALLOWED");
      if (!isAddress(address, { strict: false })) throw fail("ADDRESS_INVALID");
      const chainId = chainid ?? config.chainId;
      if (chainId !== config.chainId) throw fail("CHAIN_UNSUPPORTED", `this server signs in on chain ${config.chainId}`);
      await enforce(ctx, limits.challengesPerIp, from);

      const url = new URL(uri);
      const t = now();
      const nonce = generateSiweNonce();
      const checksummed = getAddress(address);
      const message = createSiweMessage({
        scheme: url.protocol.slice(0, -1),
        domain: url.host,
        address: checksummed,
        statement,
        uri,
        version: "1",
        chainId,
        nonce,
        issuedAt: new Date(t),
        expirationTime: new Date(t + CHALLENGE_TTL_MS),
      });
      await sql.run(SWEEP_NONCES, [t - NONCE_RETENTION_MS]);
      await sql.run(INSERT_NONCE, [nonce, checksummed, chainId, message, t, t + CHALLENGE_TTL_MS]);
      return message;
    },

    async prove(message, signature, statement) {
      const fields = parseSiwe(message);
      if (!fields) throw fail("MESSAGE_MALFORMED");
      const issued = await sql.get<{ nonce: string; address: string; message: string; expiresAt: number; usedAt: number | null }>(FIND_NONCE, [fields.nonce]);
      if (!issued) throw fail("NONCE_UNKNOWN");
      if (issued.usedAt !== null) throw fail("NONCE_USED");
      const t = now();
      if (issued.expiresAt <= t) throw fail("MESSAGE_EXPIRED");
      // Ours, so it parses; the signed message's fields must equal it, field by field.
      const challenge = parseSiwe(issued.message);
      if (!challenge) throw new Error(`the stored challenge for nonce ${issued.nonce} does not parse`);
      const mismatch = siweMismatch(challenge, fields);
      if (mismatch === "chain") throw fail("WRONG_CHAIN");
      if (mismatch === "domain") throw fail("WRONG_DOMAIN");
      if (mismatch === "address") throw fail("WRONG_ADDRESS");
      if (mismatch === "other") throw fail("MESSAGE_TAMPERED");
      // Equal to the challenge, so this asks what the challenge was issued for.
      if (challenge.statement !== statement) throw fail("MESSAGE_PURPOSE");
      // Equal to the challenge, so already true; kept so that a changed setting (an origin no
      // longer allowed, another chain) also refuses challenges issued before it.
      if (fields.chainId !== config.chainId) throw fail("WRONG_CHAIN");
      if (!allowed.has(originOf(fields.uri) ?? "")) throw fail("WRONG_DOMAIN");
      if (!isHex(signature) || signature.length < 4) throw fail("SIGNATURE_INVALID");

      // Spent before the (slow) signature check, so two racing logins cannot both use it.
      if ((await sql.run(SPEND_NONCE, [issued.nonce, t])) === 0) throw fail("NONCE_USED");

      const address = issued.address as Address;
      if (!(await signatureIsValid(address, message, signature))) throw fail("SIGNATURE_INVALID");

      const did = didFor(config.chainId, address);
      const owns = await withTimeout(deps.resolver.canSign({ address, canonical: did }, address), VERIFY_TIMEOUT_MS).catch((err: unknown) => {
        log.warn("DID registry lookup failed", { address, err: (err as Error).message });
        throw fail("CHAIN_UNAVAILABLE");
      });
      if (owns === "timeout") throw fail("CHAIN_UNAVAILABLE");
      if (!owns) throw fail("ADDRESS_NOT_DID_OWNER");
      return { address, did };
    },
  };
}

export function createEvmService(ctx: Ctx, deps: { tokens: TokenService; users: UserService; round: SiweRound }): EvmService {
  return {
    challenge: (input, from) => deps.round.issue(input, SIGN_IN_STATEMENT, from),

    async login({ message, signature, ...client }, from) {
      await enforce(ctx, ctx.limits.loginsPerIp, from);
      const { address, did } = await deps.round.prove(message, signature, SIGN_IN_STATEMENT);
      // The wallet's own account, or the account it was linked to.
      const user = await deps.users.upsert(address, { refresh: { address, did } });
      // The address signed in: the key the session's tokens act with, asked again at each use.
      return { did, number: String(user.number), ...(await deps.tokens.issue(user, "evm", { ...client, signer: address })) };
    },
  };
}
