/**
 * The client's address as the socket (or a trusted proxy) saw it. The server records it beside
 * the Request object, so no request header can pretend to be it.
 */
const ips = new WeakMap<Request, string>();

export function rememberClientIp(request: Request, ip: string) {
  ips.set(request, ip);
}

/** "local" for requests that did not come through a socket (tests calling `app.handle`). */
export function clientIp(request: Request): string {
  return ips.get(request) ?? "local";
}

/** The address `hops` proxies back in X-Forwarded-For, else the socket's. */
export function resolveClientIp(socketIp: string | undefined, forwardedFor: string | null, hops: number): string {
  if (hops > 0 && forwardedFor) {
    const chain = forwardedFor.split(",").map((s) => s.trim()).filter(Boolean);
    const candidate = chain[chain.length - hops];
    if (candidate) return candidate;
  }
  return socketIp ?? "unknown";
}
