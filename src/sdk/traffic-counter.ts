/**
 * What this client knows of its payer's voucher counter (D6), so that a transfer usually signs its
 * voucher without asking GET /traffichash first: one round trip per upload or download instead of
 * two, and one request fewer for the gateway.
 *
 * The counter is asked for whenever this client is not sure of it, and at least once a minute,
 * and kept in between: every transfer that ends in a way that says exactly what the gateway
 * counted adds that (an upload's answer: its file's bytes; a download's body read to its end: the
 * bytes received; a HEAD: nothing). Anything
 * else — an error, a refusal, a body cancelled or failing half way (the gateway then counts only
 * what it sent) — forgets it, and the next transfer asks again. A known counter is used only while
 * none of this client's transfers is open, so it is then exactly the gateway's count, and a
 * voucher stays as tight as D6 wants it (counter + bytes + a small random part): a body the caller
 * never reads keeps its transfer open, and the client asks, as before. Another device of the same
 * payer moves the counter unseen: the voucher is then short, the gateway refuses it before anything
 * moves (402), and the caller forgets and signs again (storage.ts `overtaken`).
 *
 * @example
 *   const counter = new TrafficCounter(async () => BigInt((await getTrafficHash()).used))
 *   const t = await counter.begin(bytes)         // t.size: the voucher's size
 *   const res = await fetch(…).finally(t.answered)
 *   t.end(res.ok ? bytes : undefined)            // what the gateway counted, or "not sure"
 */
export interface TrafficTransfer {
  /** The voucher's size to sign. */
  readonly size: bigint;
  /** The gateway's answer arrived: it took the voucher or refused it, so vouchers signed from now
   * on need not cover this transfer's bytes too (a streamed body's bytes are counted as it ends). */
  answered(): void;
  /** The transfer is over; `counted`: the bytes the gateway counted for it, or undefined when not sure. */
  end(counted: number | undefined): void;
}

/** Keeps two devices of one payer apart: their vouchers differ by this random part (D6's "small offset"). */
const SPREAD = 1024;
/** A kept counter is asked for again after this long, whatever happened: what another device
 * spent, or a gateway's database restored to an older state, is seen within a minute. */
const KEEP_MS = 60_000;

export class TrafficCounter {
  /** The gateway's count of this payer's bytes as of this client's ended transfers (its whole count
   * while none is open); undefined: ask. */
  private known: bigint | undefined;
  /** When `known` was last asked for (transfers' bytes added since do not renew it). */
  private knownSince = 0;
  /** Bytes of vouchers signed whose answers have not arrived (the gateway may or may not count them yet). */
  private inFlight = 0n;
  /** Transfers begun and not ended (a download's body still being read included). */
  private open = 0;
  /** Bumped by each transfer begun: a count asked for is kept only if no other began meanwhile. */
  private begun = 0;
  /** Sizes this client signed at or above the counter: no two of its vouchers alike (each is
   * single-use). Not a floor of the next size: after a transfer that moved less than its voucher
   * allowed (a cancelled download) the next voucher stays counter + bytes, not above the last one. */
  private readonly signed = new Set<bigint>();

  /** `ask`: the counter as the gateway reports it now (GET /traffichash's `used`); `now` for tests. */
  constructor(
    private readonly ask: () => Promise<bigint>,
    private readonly now: () => number = Date.now,
  ) {}

  async begin(bytes: number): Promise<TrafficTransfer> {
    const alone = this.open === 0;
    const mine = ++this.begun;
    this.open++;
    let used: bigint;
    let asked = false;
    try {
      if (alone && this.known !== undefined && this.now() - this.knownSince < KEEP_MS) used = this.known;
      else {
        used = await this.ask();
        asked = true;
      }
    } catch (err) {
      this.open--;
      throw err;
    }
    // Nothing of this client was open or began meanwhile: the answer is the whole count.
    if (asked && alone && mine === this.begun) {
      this.known = used;
      this.knownSince = this.now();
    }
    // Parallel transfers each stay covered, whatever order the gateway accepts them in.
    let size = used + this.inFlight + BigInt(bytes) + BigInt(Math.floor(Math.random() * SPREAD));
    for (const s of this.signed) if (s < used) this.signed.delete(s);
    while (this.signed.has(size)) size++;
    this.signed.add(size);
    this.inFlight += BigInt(bytes);
    let waiting = true;
    let ended = false;
    const answered = () => {
      if (waiting) this.inFlight -= BigInt(bytes);
      waiting = false;
    };
    return {
      size,
      answered,
      end: (counted) => {
        if (ended) return;
        ended = true;
        answered();
        this.open--;
        if (counted === undefined) this.known = undefined;
        else if (this.known !== undefined) this.known += BigInt(counted);
      },
    };
  }
}
