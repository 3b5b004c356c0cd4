/**
 * Messenger Mini App login (DESIGN.md D12). `initdata` is the query string the messenger hands
 * the app; its `hash` is HMAC-SHA-256 over the other fields (sorted, `key=value`, newline-joined)
 * under HMAC-SHA-256("WebAppData", bot token). A Mini App may send the same initdata again while
 * it stays open, so a repeat within the age limit logs in again.
 */
import { createHmac } from "node:crypto";
import { fail } from "./error-codes.ts";
import { safeEqual } from "./hash.ts";
import { enforce } from "./limits.ts";
import type { ClientKey } from "../http/client-key.ts";
import type { TokenService } from "./tokens.ts";
import type { UserService } from "./users.ts";
import type { ClientInfo, Ctx, TokenPair } from "./types.ts";

export interface MessengerUser {
  id: string;
  first_name: string;
  last_name: string;
  username: string;
  photo_url: string;
}

export interface MessengerService {
  login(input: { initdata: string } & ClientInfo, from: ClientKey): Promise<TokenPair>;
}

/** The hash a bot with `botToken` puts on `fields` (every field but `hash`). */
export function initDataHash(botToken: string, fields: [string, string][]): string {
  const secret = createHmac("sha256", "WebAppData").update(botToken).digest();
  // Sorted by key, not by `key=value`: "a1=…" sorts before "a=…", but key "a" before "a1".
  const checkString = [...fields]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("\n");
  return createHmac("sha256", secret).update(checkString).digest("hex");
}

const str = (v: unknown) => (typeof v === "string" || typeof v === "number" ? String(v) : "");

/** Checks `initdata` and answers its user; throws the account error of the first failed check. */
export function verifyInitData(initdata: string, botToken: string, maxAgeMs: number, nowMs: number): MessengerUser {
  const params = new URLSearchParams(initdata);
  const hash = params.get("hash");
  if (!hash) throw fail("INITDATA_NO_HASH");
  const fields = [...params].filter(([k]) => k !== "hash");
  if (!safeEqual(initDataHash(botToken, fields), hash.toLowerCase())) throw fail("INITDATA_BAD_HASH");

  const authDate = Number(params.get("auth_date"));
  if (!Number.isSafeInteger(authDate) || authDate <= 0) throw fail("INITDATA_NO_USER");
  if (nowMs - authDate * 1000 > maxAgeMs) throw fail("INITDATA_TOO_OLD");

  let user: Record<string, unknown>;
  try {
    user = JSON.parse(params.get("user") ?? "null") as Record<string, unknown>;
  } catch {
    throw fail("INITDATA_NO_USER");
  }
  const id = str(user?.id);
  if (!/^\d+$/.test(id)) throw fail("INITDATA_NO_USER");
  return { id, first_name: str(user.first_name), last_name: str(user.last_name), username: str(user.username), photo_url: str(user.photo_url) };
}

export function createMessengerService(ctx: Ctx, deps: { tokens: TokenService; users: UserService }): MessengerService {
  const { config, now, limits } = ctx;
  return {
    async login(input, from) {
      const botToken = config.messengerBotToken;
      if (!botToken) throw fail("MESSENGER_NOT_CONFIGURED");
      await enforce(ctx, limits.loginsPerIp, from);
      const m = verifyInitData(input.initdata, botToken, config.messengerMaxAge, now());
      // Names and photo change on the messenger's side; every login brings them up to date.
      const user = await deps.users.upsert(`messenger:${m.id}`, {
        refresh: {
          name: [m.first_name, m.last_name].filter(Boolean).join(" "),
          icon: m.photo_url,
          messengerInfo: {
            messenger_id: m.id,
            messenger_first_name: m.first_name,
            messenger_last_name: m.last_name,
            messenger_username: m.username,
            messenger_photo: m.photo_url,
          },
        },
      });
      return deps.tokens.issue(user, "messenger", input);
    },
  };
}
