/**
 * One call of the /v2 account model with a Bearer token, as the keys (D18) and session-grant (D19)
 * clients make it: JSON in, `{ result: 1, … }` out, anything else an AccountApiError with the
 * gateway's words. Kept out of the SDK's index: the clients are the API, this is their plumbing.
 */
import { AccountApiError } from "./account.ts";

export type BearerMethod = "GET" | "POST" | "DELETE";

export async function bearerCall<T>(doFetch: typeof fetch, url: string, token: string, method: BearerMethod, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await doFetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let json: Record<string, unknown>;
  try {
    json = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    throw new AccountApiError(res.status, "BAD_RESPONSE", `The gateway answered ${res.status} with a body that is not JSON`);
  }
  // A restricted call the storage side refuses answers its own body (spec 7): its Description then.
  if (json.result !== 1) throw new AccountApiError(res.status, String(json.error ?? "UNKNOWN"), String(json.message ?? json.Description ?? `HTTP ${res.status}`));
  return json as T;
}
