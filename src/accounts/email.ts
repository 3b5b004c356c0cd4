/**
 * Email login (DESIGN.md D12): one-time codes, passwords, resets.
 *
 * Codes: 6 digits from a CSPRNG, stored as keyed hashes, valid 10 minutes, void after 5 wrong
 * tries, used once, the newest replacing older ones; a new code at most once a minute while the
 * last is still open. Passwords: argon2id, 8 to 128 characters. No answer tells whether an email
 * has an account: a code goes to any address, and a wrong password reads the same as an unknown
 * email (and costs the same time).
 */
import { randomInt } from "node:crypto";
import { and, desc, eq, isNull } from "drizzle-orm";
import { emailCodes } from "./schema.ts";
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

const hashPassword = (password: string) => Bun.password.hash(password, { algorithm: "argon2id" });

export function createEmailService(ctx: Ctx, deps: { jwtKey: Uint8Array; mailer: Mailer; tokens: TokenService; users: UserService }): EmailService {
  const { db, now, limits, limiter, log } = ctx;
  const { mailer, tokens, users } = deps;
  const codeHash = (email: string, code: string) => keyedHash(deps.jwtKey, "email-code", `${email}\n${code}`);

  // Verifying against this when the email has no password makes both cases cost the same time.
  let dummyHash: Promise<string> | undefined;
  const dummy = () => (dummyHash ??= hashPassword(crypto.randomUUID()));

  const openCode = (email: string) =>
    db
      .select()
      .from(emailCodes)
      .where(and(eq(emailCodes.email, email), isNull(emailCodes.closedAt)))
      .orderBy(desc(emailCodes.createdAt), desc(emailCodes.id))
      .get();

  /** Closes the email's open code if `code` matches it; counts a wrong try otherwise. */
  function consumeCode(email: string, code: string) {
    const t = now();
    const outcome = db.transaction((tx) => {
      const row = openCode(email);
      if (!row || row.expiresAt <= t) return false;
      if (safeEqual(row.codeHash, codeHash(email, code))) {
        tx.update(emailCodes).set({ closedAt: t }).where(eq(emailCodes.id, row.id)).run();
        return true;
      }
      const tries = row.failedAttempts + 1;
      tx.update(emailCodes)
        .set({ failedAttempts: tries, closedAt: tries >= CODE_MAX_TRIES ? t : null })
        .where(eq(emailCodes.id, row.id))
        .run();
      return false;
    });
    if (!outcome) throw fail("CODE_WRONG");
  }

  const emailAccount = (email: string) => users.byEmail(email) ?? users.upsert(`email:${crypto.randomUUID()}`, { create: { email, name: email.split("@")[0] } });

  const withNumber = async (user: UserRow, method: "email" | "password", client?: ClientInfo): Promise<AccountTokens> => ({
    uid: user.uid,
    number: String(user.number),
    ...(await tokens.issue(user, method, client)),
  });

  return {
    async sendCode(rawEmail, ip) {
      const email = normalizeEmail(rawEmail);
      const t = now();
      const open = openCode(email);
      if (open && open.expiresAt > t && t - open.createdAt < CODE_RESEND_MS) {
        throw rateLimited(Math.ceil((open.createdAt + CODE_RESEND_MS - t) / 1000), fail("CODE_TOO_SOON").message);
      }
      enforce(ctx, limits.codeSendsPerIp, ip);
      enforce(ctx, limits.codeSendsPerEmail, email);
      enforce(ctx, limits.codeSendsOverall, "all");

      const code = String(randomInt(0, 1_000_000)).padStart(6, "0");
      const id = db.transaction((tx) => {
        tx.update(emailCodes).set({ closedAt: t }).where(and(eq(emailCodes.email, email), isNull(emailCodes.closedAt))).run();
        return tx
          .insert(emailCodes)
          .values({ email, codeHash: codeHash(email, code), createdAt: t, expiresAt: t + CODE_TTL_MS })
          .returning({ id: emailCodes.id })
          .get().id;
      });
      try {
        await mailer.send({
          to: email,
          subject: `Your Stowage code: ${code}`,
          text: `Your Stowage code is ${code}.\n\nIt is valid for 10 minutes and works once. If you did not ask for it, ignore this mail.\n`,
        });
      } catch (err) {
        db.update(emailCodes).set({ closedAt: now() }).where(eq(emailCodes.id, id)).run();
        log.error("sending a code failed", { to: email, err: (err as Error).message });
        throw fail("MAIL_FAILED");
      }
      return { message: CODE_SENT_MESSAGE };
    },

    async loginWithCode(input, ip) {
      const email = normalizeEmail(input.email);
      enforce(ctx, limits.loginsPerIp, ip);
      consumeCode(email, input.code);
      return tokens.issue(emailAccount(email), "email", input);
    },

    async register(input, ip) {
      const email = normalizeEmail(input.email);
      checkPasswordLength(input.password);
      enforce(ctx, limits.loginsPerIp, ip);
      const existing = users.byEmail(email);
      // Only someone holding a valid code learns this, and they own the address.
      const hash = await hashPassword(input.password);
      consumeCode(email, input.code);
      if (existing?.passwordHash) throw fail("ALREADY_HAS_PASSWORD");
      const user = users.update(emailAccount(email).id, { passwordHash: hash });
      return withNumber(user, "password", input);
    },

    async loginWithPassword(input, ip) {
      const email = normalizeEmail(input.email);
      enforce(ctx, limits.loginsPerIp, ip);
      // Counted before the (slow) hash check, so parallel guesses cannot all slip under the limit;
      // a right password gives its count back.
      const attempt = limiter.hit(limits.wrongPasswordsPerEmail, email);
      if (!attempt.ok) throw rateLimited(attempt.retryAfter, "Too many wrong passwords for this email; try again later");
      const user = users.byEmail(email);
      const matches = await Bun.password.verify(input.password, user?.passwordHash ?? (await dummy()));
      if (!user?.passwordHash || !matches) throw fail("PASSWORD_WRONG");
      limiter.unhit(limits.wrongPasswordsPerEmail, email);
      return withNumber(user, "password");
    },

    async resetPassword(input, ip) {
      const email = normalizeEmail(input.email);
      checkPasswordLength(input.newPassword);
      enforce(ctx, limits.loginsPerIp, ip);
      const hash = await hashPassword(input.newPassword);
      consumeCode(email, input.code);
      const user = users.update(emailAccount(email).id, { passwordHash: hash });
      tokens.revokeAll(user.id, "password reset");
      log.info("password reset", { uid: user.uid });
    },
  };
}
