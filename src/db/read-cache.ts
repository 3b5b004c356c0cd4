/**
 * Answers of a hot read, kept while the database is unchanged. A listing asked again
 * with nothing committed in between is the same rows, and SQLite tells when anything was committed,
 * by any connection or process (`Sql.dataVersion`, PRAGMA data_version: ≈ 0.1–1.6 µs). The
 * listing's statement was 41 % of the server's samples under a listobjects load, 19–23 µs of
 * ≈ 62 µs per request; kept pages made it 36–41 µs. Where the database cannot tell (PostgreSQL,
 * whose other gateways commit unseen; SQLite in memory), every read loads.
 *
 * A change anywhere drops every answer: the cache only serves reads that come with no write
 * between them, which is what a polling client or a listing paged twice does.
 *
 * @example
 *   const pages = new ReadCache<Row>(() => sql.dataVersion?.())
 *   const rows = await pages.read(`${did}\0${after}`, () => sql.all<Row>(LIST, [did, after]))
 */

export interface ReadCacheLimits {
  /** Rows of one answer above which it is not kept (a listing with no limit may be every file). */
  rowsPerAnswer: number;
  /** Rows of all answers together: the oldest answers go first. */
  rows: number;
}

const DEFAULT_LIMITS: ReadCacheLimits = { rowsPerAnswer: 1000, rows: 10_000 };

export class ReadCache<T> {
  private readonly answers = new Map<string, readonly T[]>();
  private held = 0;
  /** The database's version the kept answers were read at. */
  private at: number | undefined;

  constructor(
    private readonly version: () => number | undefined,
    private readonly limits: ReadCacheLimits = DEFAULT_LIMITS,
  ) {}

  /**
   * The rows `load` gives for `key`, or the ones it gave last while nothing has been committed
   * since. Callers must not change the rows: later readers get the same objects.
   */
  async read(key: string, load: () => Promise<T[]>): Promise<readonly T[]> {
    const now = this.version();
    if (now === undefined) return load();
    if (now !== this.at) this.clear(now);
    const kept = this.answers.get(key);
    if (kept) {
      this.answers.delete(key); // to the newest end: the oldest answers are dropped first
      this.answers.set(key, kept);
      return kept;
    }
    // Read after the version: the rows are at least as new as `now`, so a commit between the
    // two makes the next read's version differ and drops them, never keeps an older answer.
    const rows = await load();
    if (this.at === now && rows.length <= this.limits.rowsPerAnswer) this.keep(key, rows);
    return rows;
  }

  private keep(key: string, rows: readonly T[]) {
    const before = this.answers.get(key); // two reads of one key that both loaded
    if (before) this.held -= weight(before);
    this.answers.set(key, rows);
    this.held += weight(rows);
    for (const [old, oldRows] of this.answers) {
      if (this.held <= this.limits.rows) break;
      this.answers.delete(old);
      this.held -= weight(oldRows);
    }
  }

  private clear(version: number) {
    this.answers.clear();
    this.held = 0;
    this.at = version;
  }
}

/** An empty answer counts as one row: distinct empty pages must not pile up unbounded. */
function weight(rows: readonly unknown[]): number {
  return Math.max(1, rows.length);
}
