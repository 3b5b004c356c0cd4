/**
 * The encryption routes of the account API (D20): an account's wrapped age identity
 * (`GET|PUT /v2/keys/age`) and shares of file keys (`PUT|DELETE /v2/shares/<mid>/<reader>` by the
 * owner, `GET /v2/shares/<owner>/<mid>` by a reader). All take the Bearer access token of an
 * account with a DID; the DID's identity address is whose identity, and whose shares, these are.
 * `/v2/keys/age` is a fixed path beside the access-key routes' `/v2/keys/:id`, and wins over it.
 */
import { Elysia, t } from "elysia";
import { getAddress, isAddress, type Address } from "viem";
import { didBearer } from "../accounts/did-bearer.ts";
import { accountError } from "../http/errors.ts";
import type { AccessTokens } from "../http/storage-guard.ts";
import { EscrowRefused, ReplaceRefused, type Encryption } from "./service.ts";
import { access, accountErrors } from "../http/openapi.ts";

const TAG = ["encryption"];
/** A wrapped X25519 identity is ≈ 200 bytes; room for a passphrase wrap's parameters, no more. */
export const WRAPPED_MAX = 4096;
/** One X25519 stanza is ≈ 160 bytes: a share header is one, or a few. */
export const SHARE_HEADER_MAX = 8192;

/** An age v1 header: the intro line, stanzas of printable ASCII, and the MAC line (D20). It is
 * checked for shape only: the gateway holds no key to check more. */
const AGE_HEADER = /^age-encryption\.org\/v1\n(-> [\x21-\x7e]+( [\x21-\x7e]+)*\n([A-Za-z0-9+/]{0,64}\n)+)+--- [A-Za-z0-9+/]{43}\n$/;
/** A Mid is the file's Cid: base32 or base58 text. */
const MID = /^[A-Za-z0-9]{8,128}$/;

const ok = <T extends Parameters<typeof t.Object>[0]>(fields: T) => t.Object({ result: t.Literal(1), ...fields });
const identity = t.Object({
  wrapped: t.String(),
  salt: t.Union([t.String(), t.Null()], { description: "The salt the wrapping key's derivation signs (32 bytes, 0x-hex); null for an identity wrapped the earlier way, which the client re-wraps" }),
  updatedAt: t.Integer({ description: "Epoch ms of the last write" }),
});
/** A salt: 32 bytes of lower-case hex, as the SDK draws it. */
const SALT = /^0x[0-9a-f]{64}$/;

function saltOf(raw: string | undefined): string {
  if (raw === undefined) throw accountError("PARAM_ERROR", "salt is required: the 32 random bytes (0x-hex) the wrapping key's derivation signed with this gateway's domain; a client that wraps without one is out of date");
  if (!SALT.test(raw)) throw accountError("PARAM_ERROR", "salt must be 32 bytes of lower-case 0x-hex");
  return raw;
}
const share = t.Object({ owner: t.String(), mid: t.String(), reader: t.String(), header: t.String({ description: "An age v1 header (ASCII) wrapping the file key to the reader" }), updatedAt: t.Integer() });
const pair = t.Object({ a: t.String(), b: t.String() });
const escrowStatus = t.Object({ owner: t.String(), mid: t.String(), stored: t.Boolean(), encrypted: t.Boolean(), escrowed: t.Boolean({ description: "The file key is escrowed to this gateway's current age identity, verified against the stored file: its header MAC and its payload's first chunk" }) });

const REFUSALS = { not_configured: "NOT_CONFIGURED", no_file: "NOT_FOUND", not_encrypted: "PARAM_ERROR", not_for_gateway: "PARAM_ERROR", mac_mismatch: "PARAM_ERROR", no_recipient: "CONFLICT" } as const;

/** Runs `fn`, answering an escrow refusal as the account error it is. */
async function refusing<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof EscrowRefused) throw accountError(REFUSALS[err.reason], err.message);
    throw err;
  }
}

function address(raw: string, what: string): Address {
  if (!isAddress(raw, { strict: false })) throw accountError("PARAM_ERROR", `${what} must be a 0x address (got ${JSON.stringify(raw.slice(0, 64))})`);
  return getAddress(raw);
}

function mid(raw: string): string {
  if (!MID.test(raw)) throw accountError("PARAM_ERROR", "mid must be the file's Cid");
  return raw;
}

export function encryptionRoutes({ encryption, tokens, chainId }: { encryption: Encryption; tokens: AccessTokens; chainId: number }) {
  /** The caller's DID identity address, or the account API's 401. */
  const caller = async (headers: Record<string, string | undefined>): Promise<Address> => (await callerDid(headers)).address;
  const callerDid = didBearer(tokens, chainId, () => accountError("UNAUTHORIZED", "this session acts for no DID: encryption keys belong to a DID (log in with a wallet; an account without one links it first, POST /v2/user/link-wallet)"));

  return new Elysia({ name: "encryption" })
    .get(
      "/v2/keys/age",
      async ({ headers, set }) => {
        const who = await caller(headers);
        set.headers["cache-control"] = "no-store";
        const stored = await encryption.identity(who);
        if (!stored) throw accountError("NOT_FOUND", `no age identity is stored for ${who} yet: the account's client makes one at its first encrypted upload`);
        return { result: 1 as const, data: stored };
      },
      { response: { 200: ok({ data: identity }), ...accountErrors(401, 404) }, detail: { summary: "The account's age key (for files encrypted on the client), wrapped under the wallet's signature: opaque to the gateway", tags: TAG, ...access.bearer } },
    )
    .put(
      "/v2/keys/age",
      async ({ headers, body, set }) => {
        const who = await callerDid(headers);
        set.headers["cache-control"] = "no-store";
        const salt = saltOf(body.salt);
        if (body.replace === true) {
          // A replacement destroys the stored blob: the Bearer token alone is not enough (D5, action "age").
          try {
            return { result: 1 as const, data: await encryption.replaceIdentity(who, body.wrapped, salt, body) };
          } catch (err) {
            if (err instanceof ReplaceRefused) throw accountError("UNAUTHORIZED", err.message);
            throw err;
          }
        }
        // The first write needs no signature: it overwrites nothing, and a blob planted with a
        // leaked token opens for no one, so the owner's client says so and replaces it (signed).
        const { stored, written } = await encryption.putIdentity(who.address, body.wrapped, salt);
        // Never overwrite silently: files already sealed to the stored identity would be lost.
        if (!written) throw accountError("CONFLICT", "another age identity is already stored for this account: GET it, or send replace: true with a signed restricted request (action \"age\", payload = SHA-256 hex of the salt, a newline and wrapped) to rewrap it");
        return { result: 1 as const, data: stored };
      },
      {
        body: t.Object({
          wrapped: t.String({ minLength: 1, maxLength: WRAPPED_MAX, description: "The wrapped identity, as the client made it" }),
          salt: t.Optional(t.String({ maxLength: 66, description: "Required: the 32 random bytes (0x-hex) the wrapping key's derivation signed (EIP-712 EncryptionKey(string purpose, bytes32 salt) in this gateway's storage domain); stored with the blob, answered by GET" })),
          replace: t.Optional(t.Boolean({ description: "Replace a stored identity (a rewrap); default false: the first one stays. Needs the signed restricted request's fields below" })),
          did: t.Optional(t.String({ maxLength: 200 })),
          token: t.Optional(t.String({ maxLength: 200, description: "The storage session's token (hex)" })),
          requestID: t.Optional(t.Union([t.String({ maxLength: 20 }), t.Integer()])),
          payload: t.Optional(t.String({ maxLength: 64, description: "SHA-256 of the salt, a newline and wrapped (UTF-8), lowercase hex" })),
          signature: t.Optional(t.String({ maxLength: 200, description: "EIP-712 Request signature (action \"age\"), 0x-hex" })),
        }),
        response: { 200: ok({ data: identity }), ...accountErrors(400, 401, 409) },
        detail: {
          summary: "Store the account's wrapped age identity and its salt: the first write with the Bearer token; a replacement (replace: true) also with a signed restricted request, action \"age\", payload = SHA-256 hex of the salt, a newline and wrapped",
          tags: TAG,
          ...access.restricted,
        },
      },
    )
    .put(
      "/v2/shares/:a/:b",
      async ({ headers, params, body, set }) => {
        const owner = await caller(headers);
        set.headers["cache-control"] = "no-store";
        if (!AGE_HEADER.test(body.header)) throw accountError("PARAM_ERROR", "header must be an age v1 header (age-encryption.org/v1 … --- MAC)");
        return { result: 1 as const, data: await encryption.putShare(owner, mid(params.a), address(params.b, "reader"), body.header) };
      },
      {
        params: pair,
        body: t.Object({ header: t.String({ maxLength: SHARE_HEADER_MAX }) }),
        response: { 200: ok({ data: share }), ...accountErrors(400, 401) },
        detail: { summary: "Share a file key: PUT /v2/shares/<mid>/<reader address>, the owner's age header for the reader", tags: TAG, ...access.bearer },
      },
    )
    .delete(
      "/v2/shares/:a/:b",
      async ({ headers, params }) => {
        const owner = await caller(headers);
        return { result: 1 as const, data: { removed: await encryption.deleteShare(owner, mid(params.a), address(params.b, "reader")) } };
      },
      {
        params: pair,
        response: { 200: ok({ data: t.Object({ removed: t.Boolean() }) }), ...accountErrors(400, 401) },
        detail: { summary: "Remove a share: DELETE /v2/shares/<mid>/<reader address> (future access only)", tags: TAG, ...access.bearer },
      },
    )
    .get(
      "/v2/shares/:a/:b",
      async ({ headers, params, set }) => {
        const reader = await caller(headers);
        set.headers["cache-control"] = "no-store";
        const owner = address(params.a, "owner");
        const found = await refusing(() => encryption.share(owner, mid(params.b), reader));
        if (!found) throw accountError("NOT_FOUND", `${owner} has not shared ${params.b} with ${reader}: ask the owner to grant it (stowage grant)`);
        return { result: 1 as const, data: found };
      },
      {
        params: pair,
        response: { 200: ok({ data: share }), ...accountErrors(400, 401, 404, 409) },
        detail: { summary: "Your share of a file: GET /v2/shares/<owner address>/<mid> (a reader sees only its own; a buyer's is made from the escrow)", tags: TAG, ...access.bearer },
      },
    )
    .put(
      "/v2/escrows/:mid",
      async ({ headers, params, body, set }) => {
        const owner = await caller(headers);
        set.headers["cache-control"] = "no-store";
        if (!AGE_HEADER.test(body.header)) throw accountError("PARAM_ERROR", "header must be an age v1 header (age-encryption.org/v1 … --- MAC)");
        const row = await refusing(() => encryption.putEscrow(owner, mid(params.mid), body.header));
        return { result: 1 as const, data: { owner: row.owner, mid: row.mid, keyId: row.keyId, updatedAt: row.updatedAt } };
      },
      {
        params: t.Object({ mid: t.String() }),
        body: t.Object({ header: t.String({ maxLength: SHARE_HEADER_MAX }) }),
        response: { 200: ok({ data: t.Object({ owner: t.String(), mid: t.String(), keyId: t.String(), updatedAt: t.Integer() }) }), ...accountErrors(400, 401, 404, 503) },
        detail: { summary: "Escrow a priced encrypted file's key to this gateway (an age header to GET /chain's ageRecipient); kept only if it opens the stored file's header", tags: TAG, ...access.bearer },
      },
    )
    .get(
      "/v2/escrows/:a/:b",
      async ({ params }) => {
        const owner = address(params.a, "owner");
        const status = await encryption.escrowStatus(owner, mid(params.b));
        // The same answer for a private file as for none: only a published entry is anyone's to ask about.
        if (!status) throw accountError("NOT_FOUND", `${owner} has no published entry ${params.b} here (or this gateway has not indexed it yet)`);
        return { result: 1 as const, data: { owner, mid: params.b, ...status } };
      },
      {
        params: pair,
        response: { 200: ok({ data: escrowStatus }), ...accountErrors(400, 404) },
        detail: { summary: "Before buying: is <owner>'s published entry <mid> encrypted, and is its key escrowed here (verified)? 404 for anything not published", tags: TAG, ...access.public },
      },
    );
}
