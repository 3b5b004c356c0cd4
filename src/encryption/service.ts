/**
 * Wrapped age identities and shares (D20), stored as the clients send them. The gateway cannot
 * open either: an identity is wrapped under a key derived from the DID owner's signature, and a
 * share wraps a file key to the reader's public recipient. What the gateway does guarantee is
 * who may write what: an account writes only its own identity and only shares it owns.
 */
import type { Sql } from "../db/sql.ts";

export interface StoredIdentity {
  wrapped: string;
  updatedAt: number;
}

export interface Share {
  owner: string;
  mid: string;
  reader: string;
  header: string;
  updatedAt: number;
}

const GET_IDENTITY = `SELECT wrapped, updated_at AS "updatedAt" FROM age_identities WHERE account = $1`;
/** First writer wins: two clients setting up one account at once must end with one identity, or
 * files sealed to the loser's would be lost. */
const CREATE_IDENTITY = `INSERT INTO age_identities (account, wrapped, updated_at) VALUES ($1, $2, $3) ON CONFLICT (account) DO NOTHING`;
/** An explicit replacement (a rewrap after the DID owner changed). */
const REPLACE_IDENTITY = `INSERT INTO age_identities (account, wrapped, updated_at) VALUES ($1, $2, $3)
  ON CONFLICT (account) DO UPDATE SET wrapped = excluded.wrapped, updated_at = excluded.updated_at`;

const SHARE_COLUMNS = `owner, mid, reader, header, updated_at AS "updatedAt"`;
const GET_SHARE = `SELECT ${SHARE_COLUMNS} FROM age_shares WHERE owner = $1 AND mid = $2 AND reader = $3`;
const PUT_SHARE = `INSERT INTO age_shares (owner, mid, reader, header, updated_at) VALUES ($1, $2, $3, $4, $5)
  ON CONFLICT (owner, mid, reader) DO UPDATE SET header = excluded.header, updated_at = excluded.updated_at`;
const DELETE_SHARE = `DELETE FROM age_shares WHERE owner = $1 AND mid = $2 AND reader = $3`;

export function createEncryption({ sql, now = Date.now }: { sql: Sql; now?: () => number }) {
  return {
    identity: (account: string) => sql.get<StoredIdentity>(GET_IDENTITY, [account]),

    /** Stores `wrapped` unless another is stored and `replace` is false; answers what is stored
     * now and whether it is this one. */
    async putIdentity(account: string, wrapped: string, replace: boolean): Promise<{ stored: StoredIdentity; written: boolean }> {
      const at = now();
      const changed = await sql.run(replace ? REPLACE_IDENTITY : CREATE_IDENTITY, [account, wrapped, at]);
      const stored = (await sql.get<StoredIdentity>(GET_IDENTITY, [account])) as StoredIdentity;
      return { stored, written: changed > 0 || stored.wrapped === wrapped };
    },

    share: (owner: string, mid: string, reader: string) => sql.get<Share>(GET_SHARE, [owner, mid, reader]),

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
