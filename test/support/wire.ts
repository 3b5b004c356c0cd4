/**
 * HTTP answers exactly as they come off a socket: the status line, the raw headers (is there a
 * Content-Length, or Transfer-Encoding: chunked?) and the body bytes. `fetch` and `app.handle()`
 * hide how an answer was framed on the wire; these do not.
 */

export interface Wire {
  status: number;
  /** Header names in lower case. */
  headers: Map<string, string>;
  /** The bytes after the header block, unparsed (chunk framing included, if any). */
  body: Uint8Array;
}

/** One request on a connection of its own (`Connection: close`), read until the server closes. */
export async function onTheWire(url: string, init: { method?: string; headers?: Record<string, string> } = {}): Promise<Wire> {
  const u = new URL(url);
  const parts: Buffer[] = [];
  let closed!: () => void;
  const ended = new Promise<void>((resolve) => (closed = resolve));
  const socket = await Bun.connect({
    hostname: u.hostname,
    port: Number(u.port),
    socket: {
      data: (_, d) => void parts.push(Buffer.from(d)),
      close: () => closed(),
      error: () => closed(),
    },
  });
  const extra = Object.entries(init.headers ?? {})
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("");
  socket.write(`${init.method ?? "GET"} ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\n${extra}Connection: close\r\n\r\n`);
  await ended;
  const raw = Buffer.concat(parts);
  const end = raw.indexOf("\r\n\r\n");
  const [statusLine, ...lines] = raw.subarray(0, end).toString("latin1").split("\r\n");
  const headers = new Map<string, string>();
  for (const line of lines) {
    const i = line.indexOf(":");
    headers.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
  }
  return { status: Number(statusLine?.split(" ")[1]), headers, body: new Uint8Array(raw.subarray(end + 4)) };
}

/**
 * A `fetch` for the SDK that sends GET and HEAD requests over a raw socket and records each answer
 * in `seen` (other requests go through the real `fetch`). Answers are handed back un-chunked only
 * when they were not chunked: a chunked body is passed on as it came, so the caller sees it.
 */
export function wireFetch(seen: Wire[]): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const request = input instanceof Request ? new Request(input, init) : new Request(input instanceof URL ? input.href : input, init);
    if (request.method !== "GET" && request.method !== "HEAD") return fetch(request);
    const wire = await onTheWire(request.url, { method: request.method, headers: Object.fromEntries(request.headers) });
    seen.push(wire);
    const headers = new Headers([...wire.headers].filter(([k]) => k !== "transfer-encoding" && k !== "connection"));
    return new Response(request.method === "HEAD" || wire.status === 204 ? null : wire.body, { status: wire.status, headers });
  }) as typeof fetch;
}
