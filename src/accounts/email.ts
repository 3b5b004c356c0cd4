/**
 * Email login (DESIGN.md D12): one-time codes, passwords, resets.
 *
 * Codes: 6 digits from a CSPRNG, stored as keyed hashes, valid 10 minutes, void after 5 wrong
 * tries, used once, the newest replacing older ones; a new code at most once a minute while the
 * last is still open. Passwords: argon2id, 8 to 128 characters. No answer tells whether an email
 * has an account: a code goes to any address, and a wrong password reads the same as an unknown
 * email (and costs the same time). A code is closed by one conditional update, so two requests
 * (on one gateway or two, D16) cannot both use it, and wrong tries are counted relatively.
 */
import { randomInt } from "node:crypto";
import { fail } from "./error-codes.ts";
import { keyedHash, safeEqual } from "./hash.ts";
import { enforce, rateLimited } from "./limits.ts";
import type { Mailer } from "./mailer.ts";
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

export interface EmailService {
  sendCode(email: string, ip: string): Promise<{ message: string }>;
  loginWithCode(input: { email: string; code: string } & ClientInfo, ip: string): Promise<TokenPair>;
  register(input: { email: string; code: string; password: string } & ClientInfo, ip: string): Promise<AccountTokens>;
  loginWithPassword(input: { email: string; password: string }, ip: string): Promise<AccountTokens>;
  resetPassword(input: { email: string; code: string; newPassword: string }, ip: string): Promise<void>;
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

const OPEN_CODE = `SELECT id, code_hash AS "codeHash", created_at AS "createdAt", expires_at AS "expiresAt"
  FROM email_codes WHERE email = $1 AND closed_at IS NULL ORDER BY created_at DESC, id DESC LIMIT 1`;
/** Uses the code: only the request whose update closes it may log in. */
const CLOSE_CODE = "UPDATE email_codes SET closed_at = $2 WHERE id = $1 AND closed_at IS NULL";
const WRONG_TRY = `UPDATE email_codes SET failed_attempts = failed_attempts + 1,
  closed_at = CASE WHEN failed_attempts + 1 >= $3 THEN $2 ELSE closed_at END WHERE id = $1 AND closed_at IS NULL`;
const CLOSE_OPEN = "UPDATE email_codes SET closed_at = $2 WHERE email = $1 AND closed_at IS NULL";
const INSERT_CODE = "INSERT INTO email_codes (email, code_hash, created_at, expires_at) VALUES ($1, $2, $3, $4) RETURNING id";

interface OpenCode {
  id: number;
  codeHash: string;
  createdAt: number;
  expiresAt: number;
}

const hashPassword = (password: string) => Bun.password.hash(password, { algorithm: "argon2id" });

export function createEmailService(ctx: Ctx, deps: { jwtKey: Uint8Array; mailer: Mailer; tokens: TokenService; users: UserService }): EmailService {
  const { sql, now, limits, limiter, log } = ctx;
  const { mailer, tokens, users } = deps;
  const codeHash = (email: string, code: string) => keyedHash(deps.jwtKey, "email-code", `${email}\n${code}`);

  // Verifying against this when the email has no password makes both cases cost the same time.
  let dummyHash: Promise<string> | undefined;
  const dummy = () => (dummyHash ??= hashPassword(crypto.randomUUID()));

  const openCode = (email: string) => sql.get<OpenCode>(OPEN_CODE, [email]);

  /** Closes the email's open code if `code` matches it; counts a wrong try otherwise. */
  async function consumeCode(email: string, code: string) {
    const t = now();
    const row = await openCode(email);
    if (!row || row.expiresAt <= t) throw fail("CODE_WRONG");
    if (!safeEqual(row.codeHash, codeHash(email, code))) {
      await sql.run(WRONG_TRY, [row.id, t, CODE_MAX_TRIES]);
      throw fail("CODE_WRONG");
    }
    // Closed meanwhile (used by a racing request, voided, replaced): this request has nothing.
    if ((await sql.run(CLOSE_CODE, [row.id, t])) === 0) throw fail("CODE_WRONG");
  }

  const emailAccount = async (email: string) =>
    (await users.byEmail(email)) ?? users.upsert(`email:${crypto.randomUUID()}`, { create: { email, name: email.split("@")[0] } });

  const withNumber = async (user: UserRow, method: "email" | "password", client?: ClientInfo): Promise<AccountTokens> => ({
    uid: user.uid,
    number: String(user.number),
    ...(await tokens.issue(user, method, client)),
  });

  return {
    async sendCode(rawEmail, ip) {
      const email = normalizeEmail(rawEmail);
      const t = now();
      /** Seconds until the open code may be replaced, or undefined when it may be now. */
      const wait = (open: OpenCode | undefined) =>
        open && open.expiresAt > t && t - open.createdAt < CODE_RESEND_MS ? Math.ceil((open.createdAt + CODE_RESEND_MS - t) / 1000) : undefined;
      const early = wait(await openCode(email));
      if (early !== undefined) throw rateLimited(early, fail("CODE_TOO_SOON").message);
      await enforce(ctx, limits.codeSendsPerIp, ip);
      await enforce(ctx, limits.codeSendsPerEmail, email);
      await enforce(ctx, limits.codeSendsOverall, "all");

      const code = String(randomInt(0, 1_000_000)).padStart(6, "0");
      // The newest code replaces the older ones. SERIALIZABLE, and the minute is checked again
      // inside: two sends for one email that both saw no recent code conflict, and the one run
      // again finds the other's code (on SQLite the transactions simply run one after the other).
      const made = await sql.tx<{ wait: number } | { id: number }>(async (tx) => {
        const late = wait(await tx.get<OpenCode>(OPEN_CODE, [email]));
        if (late !== undefined) return { wait: late };
        await tx.run(CLOSE_OPEN, [email, t]);
        const row = await tx.get<{ id: number }>(INSERT_CODE, [email, codeHash(email, code), t, t + CODE_TTL_MS]);
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
      return { message: CODE_SENT_MESSAGE };
    },

    async loginWithCode(input, ip) {
      const email = normalizeEmail(input.email);
      await enforce(ctx, limits.loginsPerIp, ip);
      await consumeCode(email, input.code);
      return tokens.issue(await emailAccount(email), "email", input);
    },

    async register(input, ip) {
      const email = normalizeEmail(input.email);
      checkPasswordLength(input.password);
      await enforce(ctx, limits.loginsPerIp, ip);
      const existing = await users.byEmail(email);
      // Only someone holding a valid code learns this, and they own the address.
      const hash = await hashPassword(input.password);
      await consumeCode(email, input.code);
      if (existing?.passwordHash) throw fail("ALREADY_HAS_PASSWORD");
      const user = await users.update((await emailAccount(email)).id, { passwordHash: hash });
      return withNumber(user, "password", input);
    },

    async loginWithPassword(input, ip) {
      const email = normalizeEmail(input.email);
      await enforce(ctx, limits.loginsPerIp, ip);
      // Counted before the (slow) hash check, so parallel guesses cannot all slip under the limit;
      // a right password gives its count back.
      const attempt = await limiter.hit(limits.wrongPasswordsPerEmail, email);
      if (!attempt.ok) throw rateLimited(attempt.retryAfter, "Too many wrong passwords for this email; try again later");
      const user = await users.byEmail(email);
      const matches = await Bun.password.verify(input.password, user?.passwordHash ?? (await dummy()));
      if (!user?.passwordHash || !matches) throw fail("PASSWORD_WRONG");
      await limiter.unhit(limits.wrongPasswordsPerEmail, email);
      return withNumber(user, "password");
    },

    async resetPassword(input, ip) {
      const email = normalizeEmail(input.email);
      checkPasswordLength(input.newPassword);
      await enforce(ctx, limits.loginsPerIp, ip);
      const hash = await hashPassword(input.newPassword);
      await consumeCode(email, input.code);
      const user = await users.update((await emailAccount(email)).id, { passwordHash: hash });
      await tokens.revokeAll(user.id, "password reset");
      log.info("password reset", { uid: user.uid });
    },
  };
}
