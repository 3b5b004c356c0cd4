/**
 * Email login (DESIGN.md D12, D24): one-time codes, passwords, resets.
 *
 * Codes: 6 digits from a CSPRNG, stored as keyed hashes, valid 10 minutes, used once. Each code
 * belongs to the client (`clientKey()`) that asked for it: a newer code replaces only that
 * client's older one, at most once a minute while it is open, and only that client's wrong tries
 * count against it (5 void it), so a stranger can neither void nor replace the owner's code. A
 * code is tried against the asking client's own open code, or, from a client that has none (a
 * code read on another device), the email's newest one. Every try passes the login guard first
 * (login-guard.ts: per (email, client), and the email's backoff for clients it never signed in
 * from), and a code is checked before any password is hashed: a wrong code costs no argon2id run.
 *
 * Passwords: argon2id through the bounded hasher (password-hasher.ts), 8 to 128 characters. No
 * answer tells whether an email has an account: a code goes to any address, and a wrong password
 * reads the same as an unknown email (and costs the same time). A code is closed by one
 * conditional update, so two requests (on one gateway or two, D16) cannot both use it, and wrong
 * tries are counted relatively.
 */
import { randomInt } from "node:crypto";
import type { ClientKey } from "../http/client-key.ts";
import { fail } from "./error-codes.ts";
import { keyedHash, safeEqual } from "./hash.ts";
import { enforce, pairKey, rateLimited } from "./limits.ts";
import type { Attempt, LoginGuard } from "./login-guard.ts";
import type { Mailer } from "./mailer.ts";
import type { PasswordHasher } from "./password-hasher.ts";
import type { TokenService } from "./tokens.ts";
import type { UserService } from "./users.ts";
import type { ClientInfo, Ctx, TokenPair, UserRow } from "./types.ts";

export const CODE_TTL_MS = 10 * 60_000;
export const CODE_MAX_TRIES = 5;
export const CODE_RESEND_MS = 60_000;
export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 128;

/** Rows 7 and 8 of spec 4.2. */
export interface AccountTokens extends TokenPair {
  uid: string;
  number: string;
}

/** `from` is the client's key (`clientKey()`): every limit and every code counts by it. */
export interface EmailService {
  sendCode(email: string, from: ClientKey): Promise<{ message: string }>;
  loginWithCode(input: { email: string; code: string } & ClientInfo, from: ClientKey): Promise<TokenPair>;
  register(input: { email: string; code: string; password: string } & ClientInfo, from: ClientKey): Promise<AccountTokens>;
  loginWithPassword(input: { email: string; password: string }, from: ClientKey): Promise<AccountTokens>;
  resetPassword(input: { email: string; code: string; newPassword: string }, from: ClientKey): Promise<void>;
}

/** The same text whether or not the address has an account. */
export const CODE_SENT_MESSAGE = "A code was sent to this address; it is valid for 10 minutes";

const EMAIL_PATTERN = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export function normalizeEmail(raw: string): string {
  const email = raw.trim().toLowerCase();
  if (email.length > 254 || !EMAIL_PATTERN.test(email)) throw fail("EMAIL_INVALID");
  return email;
}

/** Characters, not UTF-16 units: an emoji is one character of a password. */
function checkPasswordLength(password: string) {
  const length = [...password].length;
  if (length < PASSWORD_MIN || length > PASSWORD_MAX) throw fail("PASSWORD_LENGTH");
}

const CODE_FIELDS = `id, code_hash AS "codeHash", created_at AS "createdAt", expires_at AS "expiresAt"`;
/** The open code `client` asked for last (codes of an older version, with no client, are no client's). */
const OWN_CODE = `SELECT ${CODE_FIELDS} FROM email_codes WHERE email = $1 AND client = $2 AND closed_at IS NULL ORDER BY created_at DESC, id DESC LIMIT 1`;
/** The email's newest open code, whoever asked for it. */
const NEWEST_CODE = `SELECT ${CODE_FIELDS} FROM email_codes WHERE email = $1 AND closed_at IS NULL AND expires_at > $2 ORDER BY created_at DESC, id DESC LIMIT 1`;
/** Uses the code: only the request whose update closes it may log in. */
const CLOSE_CODE = "UPDATE email_codes SET closed_at = $2 WHERE id = $1 AND closed_at IS NULL";
const WRONG_TRY = `UPDATE email_codes SET failed_attempts = failed_attempts + 1,
  closed_at = CASE WHEN failed_attempts + 1 >= $3 THEN $2 ELSE closed_at END WHERE id = $1 AND closed_at IS NULL`;
const CLOSE_OWN = "UPDATE email_codes SET closed_at = $3 WHERE email = $1 AND client = $2 AND closed_at IS NULL";
const INSERT_CODE = "INSERT INTO email_codes (email, code_hash, created_at, expires_at, client) VALUES ($1, $2, $3, $4, $5) RETURNING id";

interface OpenCode {
  id: number;
  codeHash: string;
  createdAt: number;
  expiresAt: number;
}

/** A code that matched, not yet used: `use` closes it (false when a racing request used it first). */
interface MatchedCode {
  attempt: Attempt;
  use(): Promise<boolean>;
}

export function createEmailService(
  ctx: Ctx,
  deps: { jwtKey: Uint8Array; mailer: Mailer; tokens: TokenService; users: UserService; guard: LoginGuard; hasher: PasswordHasher },
): EmailService {
  const { sql, now, limits, log } = ctx;
  const { mailer, tokens, users, guard, hasher } = deps;
  const codeHash = (email: string, code: string) => keyedHash(deps.jwtKey, "email-code", `${email}\n${code}`);

  // Verifying against this when the email has no password makes both cases cost the same time.
  let dummyHash: Promise<string> | undefined;
  const dummy = () => {
    dummyHash ??= hasher.hash(crypto.randomUUID()).catch((err: unknown) => {
      dummyHash = undefined;
      throw err;
    });
    return dummyHash;
  };

  /**
   * Checks `code` for `email` from `from`, after the login guard let the try in: a match is
   * answered (not yet used), anything else throws CODE_WRONG and stays counted as a failure.
   */
  async function matchCode(email: string, code: string, from: ClientKey): Promise<MatchedCode> {
    const attempt = await guard.begin("code", email, from);
    const t = now();
    const own = await sql.get<OpenCode>(OWN_CODE, [email, from]);
    const row = own && own.expiresAt > t ? own : await sql.get<OpenCode>(NEWEST_CODE, [email, t]);
    if (!row || row.expiresAt <= t) throw fail("CODE_WRONG");
    if (!safeEqual(row.codeHash, codeHash(email, code))) {
      // Only the asking client's wrong tries wear its code out; a stranger's never do.
      if (row === own) await sql.run(WRONG_TRY, [row.id, t, CODE_MAX_TRIES]);
      throw fail("CODE_WRONG");
    }
    // Closed meanwhile (used by a racing request, voided, replaced): this request has nothing.
    return { attempt, use: async () => (await sql.run(CLOSE_CODE, [row.id, now()])) === 1 };
  }

  /** Uses a matched code and records the sign-in; CODE_WRONG when a racing request used it first. */
  async function useCode(matched: MatchedCode) {
    if (!(await matched.use())) throw fail("CODE_WRONG");
    await matched.attempt.succeeded();
  }

  /** argon2id of a password whose code matched; a busy hasher leaves the code open and uncounted. */
  async function hashFor(matched: MatchedCode, password: string) {
    try {
      return await hasher.hash(password);
    } catch (err) {
      await matched.attempt.release();
      throw err;
    }
  }

  const emailAccount = async (email: string) =>
    (await users.byEmail(email)) ?? users.upsert(`email:${crypto.randomUUID()}`, { create: { email, name: email.split("@")[0] } });

  const withNumber = async (user: UserRow, method: "email" | "password", client?: ClientInfo): Promise<AccountTokens> => ({
    uid: user.uid,
    number: String(user.number),
    ...(await tokens.issue(user, method, client)),
  });

  return {
    async sendCode(rawEmail, from) {
      const email = normalizeEmail(rawEmail);
      const t = now();
      /** Seconds until this client's open code may be replaced, or undefined when it may be now. */
      const wait = (open: OpenCode | undefined) =>
        open && open.expiresAt > t && t - open.createdAt < CODE_RESEND_MS ? Math.ceil((open.createdAt + CODE_RESEND_MS - t) / 1000) : undefined;
      const early = wait(await sql.get<OpenCode>(OWN_CODE, [email, from]));
      if (early !== undefined) throw rateLimited(early, fail("CODE_TOO_SOON").message);
      await enforce(ctx, limits.codeSendsPerIp, from);
      await enforce(ctx, limits.codeSendsPerEmailClient, pairKey(email, from));
      // A client the address signed in from has its own allowance only: strangers who spent the
      // address's shared one leave the owner able to get a code.
      if (!(await guard.knows(email, from))) {
        await enforce(ctx, limits.codeSendsPerEmail, email);
        await enforce(ctx, limits.codeSendsOverall, "all");
      }

      const code = String(randomInt(0, 1_000_000)).padStart(6, "0");
      // The client's newest code replaces its older ones. SERIALIZABLE, and the minute is checked
      // again inside: two sends from one client that both saw no recent code conflict, and the one
      // run again finds the other's code (on SQLite the transactions simply run one after the other).
      const made = await sql.tx<{ wait: number } | { id: number }>(async (tx) => {
        const late = wait(await tx.get<OpenCode>(OWN_CODE, [email, from]));
        if (late !== undefined) return { wait: late };
        await tx.run(CLOSE_OWN, [email, from, t]);
        const row = await tx.get<{ id: number }>(INSERT_CODE, [email, codeHash(email, code), t, t + CODE_TTL_MS, from]);
        if (!row) throw new Error("inserting an email code returned no id");
        return { id: row.id };
      });
      if ("wait" in made) throw rateLimited(made.wait, fail("CODE_TOO_SOON").message);
      const { id } = made;
      try {
        await mailer.send({
          to: email,
          subject: `Your Stowage code: ${code}`,
          text: `Your Stowage code is ${code}.\n\nIt is valid for 10 minutes and works once. If you did not ask for it, ignore this mail.\n`,
        });
      } catch (err) {
        await sql.run(CLOSE_CODE, [id, now()]);
        log.error("sending a code failed", { to: email, err: (err as Error).message });
        throw fail("MAIL_FAILED");
      }
      return { message: mailer.deliveredTo ? `${CODE_SENT_MESSAGE}. It was written to ${mailer.deliveredTo}` : CODE_SENT_MESSAGE };
    },

    async loginWithCode(input, from) {
      const email = normalizeEmail(input.email);
      await enforce(ctx, limits.loginsPerIp, from);
      await useCode(await matchCode(email, input.code, from));
      return tokens.issue(await emailAccount(email), "email", input);
    },

    async register(input, from) {
      const email = normalizeEmail(input.email);
      checkPasswordLength(input.password);
      await enforce(ctx, limits.loginsPerIp, from);
      // The code first: a request without it costs no argon2id run.
      const matched = await matchCode(email, input.code, from);
      // Only someone holding a valid code learns this, and they own the address.
      if ((await users.byEmail(email))?.passwordHash) {
        await useCode(matched);
        throw fail("ALREADY_HAS_PASSWORD");
      }
      const hash = await hashFor(matched, input.password);
      await useCode(matched);
      const user = await users.update((await emailAccount(email)).id, { passwordHash: hash });
      return withNumber(user, "password", input);
    },

    async loginWithPassword(input, from) {
      const email = normalizeEmail(input.email);
      await enforce(ctx, limits.loginsPerIp, from);
      // Counted before the (slow) hash check, so parallel guesses cannot all slip under the limits;
      // a right password gives its counts back.
      const attempt = await guard.begin("password", email, from);
      const user = await users.byEmail(email);
      let matches: boolean;
      try {
        matches = await hasher.verify(input.password, user?.passwordHash ?? (await dummy()));
      } catch (err) {
        await attempt.release();
        throw err;
      }
      if (!user?.passwordHash || !matches) throw fail("PASSWORD_WRONG");
      await attempt.succeeded();
      return withNumber(user, "password");
    },

    async resetPassword(input, from) {
      const email = normalizeEmail(input.email);
      checkPasswordLength(input.newPassword);
      await enforce(ctx, limits.loginsPerIp, from);
      const matched = await matchCode(email, input.code, from);
      const hash = await hashFor(matched, input.newPassword);
      await useCode(matched);
      const user = await users.update((await emailAccount(email)).id, { passwordHash: hash });
      await tokens.revokeAll(user.id, "password reset");
      log.info("password reset", { uid: user.uid });
    },
  };
}
