/**
 * A service a request needs did not answer (the chain behind the DID registry, say): not a verdict
 * on the request, so nobody is refused for good, and not the request's fault. Each API edge
 * answers it as 503 with Retry-After. Its own file, as config-error.ts is, so that the folders that
 * throw it and the edges that map it need not import each other.
 */
export class Unavailable extends Error {
  override name = "Unavailable";
  /** Seconds a client should wait before it tries again. */
  readonly retryAfter: number = 5;
  /** What the failing client said (for the log, never the answer). */
  readonly detail: string;
  constructor(message: string, detail: string) {
    super(message);
    this.detail = detail;
  }
}
