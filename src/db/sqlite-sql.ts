/**
 * The data-access layer (sql.ts) on SQLite. One connection writes: writing transactions are
 * `BEGIN IMMEDIATE` and one at a time, queued in process, because a transaction stays open across
 * the awaits of its function and a second BEGIN on the same connection would fail (or, worse, a
 * stray write would join the open transaction and roll back with it). Statements outside a
 * transaction that only read run on the writing connection while no transaction is open, else on
 * a second connection, so they see committed rows only and never wait for a writer (WAL).
 * bun:sqlite is synchronous: every promise here is settled at once, but for a durable commit's
 * fsync of the log, which runs in the thread pool after the connection is free again (wal-sync.ts:
 * group commit). The log is checkpointed by a worker thread, not inside a COMMIT on the event
 * loop (checkpointer.ts).
 */
import { Database, type Statement } from "bun:sqlite";
import type { Param, Queryable, Sql, TxOptions } from "./sql.ts";
import { WalSync } from "./wal-sync.ts";
import { Checkpointer } from "./checkpointer.ts";

/** The server passes `onCheckpointError`; the rest is for tests. */
export interface SqliteSqlOptions {
  /** Stands in for the log's fsync (wal-sync.ts). */
  fsync?: ConstructorParameters<typeof WalSync>[1];
  /** Commits between checkpoints (checkpointer.ts). */
  checkpointEvery?: number;
  /** Told when the checkpoint thread fails (SQLite then checkpoints by itself). */
  onCheckpointError?: (err: Error) => void;
  /** The checkpoint thread's script (checkpointer.ts). */
  checkpointScript?: string;
}

/** Distinct SQL texts kept prepared per connection; `IN (…)` lists of every length add texts. */
const MAX_STATEMENTS = 1000;
/** SQLite's own default, for when the checkpoint thread fails. */
const SQLITE_AUTOCHECKPOINT = 1000;
const READ_ONLY = /^\s*SELECT\b/i;
const FOR_UPDATE = /\s+FOR\s+UPDATE\s*$/i;

type Bindable = string | number | bigint | boolean | null | Uint8Array;

/** Prepared statements of one connection, by SQL text, with `$n` rewritten to SQLite's `?n`. */
class Statements {
  private readonly cache = new Map<string, Statement>();
  /** Set by close(): a timer that outlives its database (a lease renewal, say) gets a plain error
   * instead of reaching a closed connection. */
  closed = false;
  constructor(private readonly db: Database) {}

  of(text: string): Statement {
    if (this.closed) throw new Error("the database is closed");
    let stmt = this.cache.get(text);
    if (!stmt) {
      if (this.cache.size >= MAX_STATEMENTS) this.clear();
      stmt = this.db.prepare(text.replace(FOR_UPDATE, "").replace(/\$(\d+)/g, "?$1"));
      this.cache.set(text, stmt);
    }
    return stmt;
  }

  clear(): void {
    for (const s of this.cache.values()) s.finalize();
    this.cache.clear();
  }
}

/** Statements on one connection, as a Queryable. */
class Connection implements Queryable {
  readonly dialect = "sqlite" as const;
  constructor(readonly statements: Statements) {}
  async all<T extends object>(text: string, params: readonly Param[] = []): Promise<T[]> {
    return this.statements.of(text).all(...(params as Bindable[])) as T[];
  }
  async get<T extends object>(text: string, params: readonly Param[] = []): Promise<T | undefined> {
    return (this.statements.of(text).get(...(params as Bindable[])) ?? undefined) as T | undefined;
  }
  async run(text: string, params: readonly Param[] = []): Promise<number> {
    return this.statements.of(text).run(...(params as Bindable[])).changes;
  }
}

export class SqliteSql implements Sql {
  readonly dialect = "sqlite" as const;
  private readonly writer: Connection;
  private readonly reader: Connection;
  private readonly readerDb: Database | undefined;
  /** Transactions (and writes waiting behind them) queued or running. */
  private held = 0;
  private tail: Promise<void> = Promise.resolve();
  /**
   * Where durable commits wait for their fsync: set when the owner asked for durable commits
   * (`synchronous` FULL or EXTRA) on a WAL database in a file; the connection then runs NORMAL.
   * Without it (`:memory:`, or an owner that chose NORMAL) commits are as SQLite makes them.
   */
  readonly wal: WalSync | undefined;
  get failure(): Error | undefined {
    return this.wal?.failed;
  }
  /** Checkpoints the log off the event loop; set along with `wal`. */
  readonly checkpoints: Checkpointer | undefined;
  /** Called right after each COMMIT of a transaction, with whether it awaits an fsync (tests). */
  onCommit: ((durable: boolean) => void) | undefined;

  /**
   * `db` is the writing connection (its owner set the pragmas and migrated); `file`, when given,
   * opens the read-only second connection (not for `:memory:`, which a second connection would
   * not see).
   */
  constructor(
    private readonly db: Database,
    file?: string,
    opts: SqliteSqlOptions = {},
  ) {
    this.writer = new Connection(new Statements(db));
    const synchronous = (db.query("PRAGMA synchronous").get() as { synchronous: number }).synchronous;
    const journal = (db.query("PRAGMA journal_mode").get() as { journal_mode: string }).journal_mode;
    if (file && file !== ":memory:" && journal === "wal" && synchronous >= 2) {
      this.wal = new WalSync(`${file}-wal`, opts.fsync);
      db.exec("PRAGMA synchronous = NORMAL");
      db.exec("PRAGMA wal_autocheckpoint = 0");
      this.checkpoints = new Checkpointer({
        file,
        hold: () => this.acquire(),
        fallback: () => db.exec(`PRAGMA wal_autocheckpoint = ${SQLITE_AUTOCHECKPOINT}`),
        every: opts.checkpointEvery,
        onError: opts.onCheckpointError,
        script: opts.checkpointScript,
      });
    }
    if (file && file !== ":memory:") {
      this.readerDb = new Database(file, { readonly: true, strict: true });
      this.readerDb.exec("PRAGMA busy_timeout = 5000");
      this.reader = new Connection(new Statements(this.readerDb));
    } else {
      this.reader = this.writer;
    }
  }

  /**
   * The reading connection's PRAGMA data_version: it changes with every commit of another
   * connection, the writing one (which any write of this process uses) and other processes'.
   */
  dataVersion(): number | undefined {
    if (!this.readerDb) return undefined;
    return (this.reader.statements.of("PRAGMA data_version").get() as { data_version: number }).data_version;
  }

  all<T extends object>(text: string, params?: readonly Param[]): Promise<T[]> {
    return READ_ONLY.test(text) ? this.readingConnection().all<T>(text, params) : this.durably(this.exclusive(() => this.writer.all<T>(text, params)));
  }
  get<T extends object>(text: string, params?: readonly Param[]): Promise<T | undefined> {
    return READ_ONLY.test(text) ? this.readingConnection().get<T>(text, params) : this.durably(this.exclusive(() => this.writer.get<T>(text, params)));
  }

  /**
   * Where a read outside any transaction runs: the writing connection while no transaction is
   * open or queued (it then sees committed rows only, as the reader would), else the reader.
   * The reader drops its whole page cache whenever another connection has committed, so after
   * every write its next read fetched each page again from the log (10–28 µs per read
   * in an upload, against 1.5–4 µs on the writer, whose cache holds what it just wrote).
   */
  private readingConnection(): Connection {
    return this.held === 0 ? this.writer : this.reader;
  }
  run(text: string, params?: readonly Param[]): Promise<number> {
    return this.durably(this.exclusive(() => this.writer.run(text, params)));
  }

  async tx<T>(fn: (tx: Queryable) => Promise<T>, opts?: TxOptions): Promise<T> {
    const durable = opts?.durable !== false;
    const release = await this.acquire();
    let out: T;
    try {
      this.db.exec("BEGIN IMMEDIATE");
      try {
        out = await fn(this.writer);
        this.db.exec("COMMIT");
        this.checkpoints?.committed();
      } catch (err) {
        if (this.db.inTransaction) this.db.exec("ROLLBACK");
        throw err;
      }
      this.onCommit?.(durable);
    } finally {
      release();
    }
    // The fsync runs with the connection free: the next transactions commit meanwhile and the
    // one fsync after this carries them too. A light commit is carried by the next durable one.
    const flushed = durable ? this.wal?.flush() : undefined;
    opts?.committed?.();
    await flushed;
    return out;
  }

  /** Everything on this thread closes at once (the owner closes the writing connection right
   * after); the promise waits for the checkpoint thread to close its connection. */
  close(): Promise<void> {
    this.wal?.close();
    this.writer.statements.closed = this.reader.statements.closed = true;
    this.writer.statements.clear();
    if (this.readerDb) {
      this.reader.statements.clear();
      this.readerDb.close();
    }
    return this.checkpoints?.close() ?? Promise.resolve();
  }

  /** A statement that commits on its own (outside any transaction) resolves once it is on disk. */
  private async durably<T>(written: Promise<T>): Promise<T> {
    const out = await written;
    await this.wal?.flush();
    return out;
  }

  /** A write outside any transaction: at once when no transaction is open, else after them. */
  private async exclusive<T>(op: () => Promise<T>): Promise<T> {
    if (this.held === 0) return this.committed(await op());
    const release = await this.acquire();
    try {
      return this.committed(await op());
    } finally {
      release();
    }
  }

  /** A statement outside a transaction commits by itself. */
  private committed<T>(out: T): T {
    this.checkpoints?.committed();
    return out;
  }

  private acquire(): Promise<() => void> {
    this.held++;
    let release!: () => void;
    const done = new Promise<void>((ok) => {
      release = () => {
        this.held--;
        ok();
      };
    });
    const prev = this.tail;
    this.tail = prev.then(() => done);
    return prev.then(() => release);
  }
}
