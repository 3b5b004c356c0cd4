/** Keyed hashes of the secrets clients hold, and a constant-time comparison. */
import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * HMAC-SHA-256 of `value` under a key derived from the server key for one `purpose`, so a hash
 * made for one kind of secret never matches another kind.
 */
export function keyedHash(serverKey: Uint8Array, purpose: string, value: string): string {
  const key = createHmac("sha256", serverKey).update(`stowage/${purpose}`).digest();
  return createHmac("sha256", key).update(value).digest("hex");
}

/** Equal-length inputs are compared without an early exit; unequal lengths say nothing secret. */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
