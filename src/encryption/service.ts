/**
 * Wrapped age identities and shares (D20), stored as the clients send them. The gateway cannot
 * open either: an identity is wrapped under a key derived from the DID owner's signature, and a
 * share wraps a file key to the reader's public recipient. What the gateway does guarantee is
 * who may write what: an account writes only its own identity and only shares it owns.
 */
import type { Address } from "viem";
import type { Sql } from "../db/sql.ts";
import { Failure } from "../failure.ts";
import type { Did } from "../identity/did.ts";
import type { RestrictedInput, Sessions } from "../authorities/sessions.ts";
import { FILE_KEY_CHECK_BYTES, fileKeyOpens, headerFor, identityToRecipient, readFileKey } from "../sdk/age.ts";
import { replacePayload } from "../sdk/encryption.ts";

export interface StoredIdentity {
  wrapped: string;
  /** The salt the wrapping key's derivation signed (0x-hex); null for an identity wrapped the earlier way. */
  salt: string | null;
  updatedAt: number;
}

export interface Share {
  owner: string;
  mid: string;
  reader: string;
  header: string;
  updatedAt: number;
}

const GET_IDENTITY = `SELECT wrapped, salt, updated_at AS "updatedAt" FROM age_identities WHERE account = $1`;
/** First writer wins: two clients setting up one account at once must end with one identity, or
 * files sealed to the loser's would be lost. */
const CREATE_IDENTITY = `INSERT INTO age_identities (account, wrapped, salt, updated_at) VALUES ($1, $2, $3, $4) ON CONFLICT (account) DO NOTHING`;
/** An explicit replacement (a rewrap after the DID owner changed). */
const REPLACE_IDENTITY = `INSERT INTO age_identities (account, wrapped, salt, updated_at) VALUES ($1, $2, $3, $4)
  ON CONFLICT (account) DO UPDATE SET wrapped = excluded.wrapped, salt = excluded.salt, updated_at = excluded.updated_at`;

const SHARE_COLUMNS = `owner, mid, reader, header, updated_at AS "updatedAt"`;
const GET_SHARE = `SELECT ${SHARE_COLUMNS} FROM age_shares WHERE owner = $1 AND mid = $2 AND reader = $3`;
const PUT_SHARE = `INSERT INTO age_shares (owner, mid, reader, header, updated_at) VALUES ($1, $2, $3, $4, $5)
  ON CONFLICT (owner, mid, reader) DO UPDATE SET header = excluded.header, updated_at = excluded.updated_at`;
const DELETE_SHARE = `DELETE FROM age_shares WHERE owner = $1 AND mid = $2 AND reader = $3`;

const GET_ESCROW = `SELECT owner, mid, key_id AS "keyId", header, updated_at AS "updatedAt" FROM age_escrows WHERE owner = $1 AND mid = $2`;
const PUT_ESCROW = `INSERT INTO age_escrows (owner, mid, key_id, header, updated_at) VALUES ($1, $2, $3, $4, $5)
  ON CONFLICT (owner, mid) DO UPDATE SET key_id = excluded.key_id, header = excluded.header, updated_at = excluded.updated_at`;

export interface Escrow {
  owner: string;
  mid: string;
  keyId: string;
  header: string;
  updatedAt: number;
}

/** What priced encrypted entries need beyond the database (D20); absent, escrows are refused. */
export interface EscrowDeps {
  /** This gateway's age identity (`AGE-SECRET-KEY-1…`): STOWAGE_AGE_IDENTITY or data/secrets. */
  identity: string;
  /** `owner`'s stored file with this Cid: its `encryption` and a reader of its first `bytes`; undefined when none. */
  storedFile(owner: Address, cid: string): Promise<{ encryption: string; head(bytes: number): ReadableStream<Uint8Array> } | undefined>;
  /** Whether the directory's index says `reader` bought `owner`'s entry `mid`. */
  bought(owner: Address, mid: string, reader: Address): Promise<boolean>;
  /** Whether the directory's index holds `owner`'s entry `mid`: the escrow status answers for
   * published entries only, so it tells nothing of a private file. */
  published(owner: Address, mid: string): Promise<boolean>;
  /** The age recipient `reader`'s DID publishes. */
  recipientOf(reader: Address): Promise<string | undefined>;
}

/** Why an escrow or a buyer's share cannot be made; the routes map each to an account error. */
export class EscrowRefused extends Error {
  override name = "EscrowRefused";
  constructor(
    readonly reason: "not_configured" | "no_file" | "not_encrypted" | "not_for_gateway" | "mac_mismatch" | "no_recipient",
    message: string,
  ) {
    super(message);
  }
}

/** Why a replacement of a stored identity is refused: its signed restricted request (D5) is missing, wrong, or replayed. */
export class ReplaceRefused extends Error {
  override name = "ReplaceRefused";
}


/**
 * `sessions` verifies the signed restricted requests that replacements need; without it a
 * replacement is refused (a leaked access token must not overwrite what only the owner can open).
 */
export function createEncryption({ sql, now = Date.now, escrow, sessions }: { sql: Sql; now?: () => number; escrow?: EscrowDeps; sessions?: Pick<Sessions, "restricted"> }) {
  /** The gateway's recipient: what owners escrow to, and the key id of what they escrowed. */
  const gatewayRecipient = escrow ? identityToRecipient(escrow.identity) : undefined;
  const bytesOf = (text: string) => new Blob([new TextEncoder().encode(text)]).stream();

  /** A buyer's share, made from the escrow once the directory has indexed the purchase. */
  async function buyerShare(owner: Address, mid: string, reader: Address): Promise<Share | undefined> {
    if (!escrow) return undefined;
    const held = await sql.get<Escrow>(GET_ESCROW, [owner, mid]);
    if (!held || held.keyId !== gatewayRecipient || !(await escrow.bought(owner, mid, reader))) return undefined;
    const recipient = await escrow.recipientOf(reader);
    if (!recipient) throw new EscrowRefused("no_recipient", `${reader} bought ${mid} but has published no age recipient on its DID: run \`stowage age-key --publish\` and ask again`);
    const fileKey = await readFileKey([escrow.identity], bytesOf(held.header));
    const header = new TextDecoder().decode(headerFor(fileKey, [recipient]));
    const updatedAt = now();
    await sql.run(PUT_SHARE, [owner, mid, reader, header, updatedAt]);
    return { owner, mid, reader, header, updatedAt };
  }

  /** Stores `wrapped` with its salt unless another is stored and `replace` is false; answers
   * what is stored now and whether it is this one. */
  async function putIdentity(account: string, wrapped: string, salt: string, replace: boolean): Promise<{ stored: StoredIdentity; written: boolean }> {
    const at = now();
    const changed = await sql.run(replace ? REPLACE_IDENTITY : CREATE_IDENTITY, [account, wrapped, salt, at]);
    const stored = (await sql.get<StoredIdentity>(GET_IDENTITY, [account])) as StoredIdentity;
    return { stored, written: changed > 0 || (stored.wrapped === wrapped && stored.salt === salt) };
  }

  return {
    gatewayRecipient,

    /**
     * Keeps `owner`'s file key for `mid`, wrapped to this gateway (`header`), once it is shown to
     * be the key of the file the owner stores here: the stored file's header MAC checks out under
     * it, and so does its payload's first chunk (a header made for the key over a payload sealed
     * under another would pass the MAC alone, and a buyer would pay for bytes nobody can open).
     */
    async putEscrow(owner: Address, mid: string, header: string): Promise<Escrow> {
      if (!escrow || !gatewayRecipient) throw new EscrowRefused("not_configured", "this gateway holds no age identity");
      const file = await escrow.storedFile(owner, mid);
      if (!file) throw new EscrowRefused("no_file", `${owner} stores no file ${mid} at this gateway`);
      if (file.encryption !== "age") throw new EscrowRefused("not_encrypted", `${mid} is not an encrypted (age) file: nothing to escrow`);
      let fileKey: Uint8Array;
      try {
        fileKey = await readFileKey([escrow.identity], bytesOf(header));
      } catch {
        throw new EscrowRefused("not_for_gateway", `the header does not wrap a file key to this gateway's recipient ${gatewayRecipient} (GET /chain: ageRecipient)`);
      }
      const opens = await fileKeyOpens(fileKey, file.head(FILE_KEY_CHECK_BYTES));
      if (opens !== true) {
        const why = opens === "header" ? "its header MAC does not check out" : "its header MAC checks out, but the first chunk of its payload does not open";
        throw new EscrowRefused("mac_mismatch", `the escrowed key is not the key of the stored file ${mid}: ${why}`);
      }
      const row: Escrow = { owner, mid, keyId: gatewayRecipient, header, updatedAt: now() };
      await sql.run(PUT_ESCROW, [row.owner, row.mid, row.keyId, row.header, row.updatedAt]);
      return row;
    },

    /**
     * What a buyer may know before paying: is the file encrypted, and is its key escrowed here
     * (verified, current key)? Only of a published entry (undefined otherwise, whether a file
     * exists or not): anyone may ask, and a private file's existence is nobody else's business.
     */
    async escrowStatus(owner: Address, mid: string): Promise<{ stored: boolean; encrypted: boolean; escrowed: boolean } | undefined> {
      if (!escrow || !(await escrow.published(owner, mid))) return undefined;
      const file = await escrow.storedFile(owner, mid);
      const held = await sql.get<Escrow>(GET_ESCROW, [owner, mid]);
      return { stored: Boolean(file), encrypted: file?.encryption === "age", escrowed: Boolean(held && held.keyId === gatewayRecipient) };
    },

    identity: (account: string) => sql.get<StoredIdentity>(GET_IDENTITY, [account]),

    /** The first write of `account`'s identity (no signature: see the routes); never overwrites. */
    putIdentity: (account: string, wrapped: string, salt: string) => putIdentity(account, wrapped, salt, false),

    /**
     * Replaces the stored identity with `wrapped` and its salt (a rewrap), for a Bearer caller
     * that also signed a restricted request (action "age", payload = replacePayload(wrapped,
     * salt)): an access token alone could otherwise overwrite the blob, and every file sealed to
     * the identity in it would be lost to its owner. A session key is never asked (the storage
     * sessions grant it uploads and deletes only). The payload is checked before the signature,
     * so a wrong one claims no requestID.
     */
    async replaceIdentity(caller: Did, wrapped: string, salt: string, input: RestrictedInput): Promise<StoredIdentity> {
      if (!sessions) throw new ReplaceRefused("this gateway cannot verify signed requests: no replacement");
      if (input.payload !== undefined && input.payload !== replacePayload(wrapped, salt)) throw new ReplaceRefused("the signed payload is not the SHA-256 (hex) of the salt, a newline and wrapped: sign the blob you send");
      try {
        await sessions.restricted(input, "age", caller);
      } catch (err) {
        if (err instanceof Failure && err.code === "unauthenticated") throw new ReplaceRefused(`replacing a stored age identity needs a signed restricted request (action "age", payload = SHA-256 of wrapped): ${err.message}`);
        throw err;
      }
      return (await putIdentity(caller.address, wrapped, salt, true)).stored;
    },

    /** `reader`'s share of `owner`'s `mid`; for a buyer of an escrowed entry, made on this request. */
    share: async (owner: Address, mid: string, reader: Address) => (await sql.get<Share>(GET_SHARE, [owner, mid, reader])) ?? (await buyerShare(owner, mid, reader)),

    async putShare(owner: string, mid: string, reader: string, header: string): Promise<Share> {
      const updatedAt = now();
      await sql.run(PUT_SHARE, [owner, mid, reader, header, updatedAt]);
      return { owner, mid, reader, header, updatedAt };
    },

    /** True when there was a share to remove. */
    deleteShare: async (owner: string, mid: string, reader: string) => (await sql.run(DELETE_SHARE, [owner, mid, reader])) > 0,
  };
}

export type Encryption = ReturnType<typeof createEncryption>;
