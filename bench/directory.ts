/**
 * The file directory: search latency per query class at 1M entries on both databases (SQLite
 * FTS5, PostgreSQL tsvector + GIN; D16), and the indexing rate side by side with a baseline
 * (bench/README.md).
 *
 * Search: the real service behind GET /challenge (`directorySearch`: ranking, the stored-filter
 * join, the document-frequency cutoff) over a synthetic corpus written straight into each
 * database (the same rows for both), with a Zipf-distributed vocabulary. Query classes: a rare
 * word, a common word (in 3–30 % of the entries), a middle word, two words, a word and the prefix
 * of a second, 3- and 5-letter prefixes, an accented word in capitals, and no query (newest first). Per
 * class and database: p50 and p99 over every round, and the p99 of each round (the machine is
 * shared: the spread says how far to trust one number). goal: p99 < 10 ms.
 *
 * Indexing: synthetic decoded Directory events (publish, update, grant, revoke, buy, unpublish)
 * applied through the real consumer, in ranges of `--batch` events per transaction (as the
 * indexer commits one block range per transaction), into a fresh SQLite database each round;
 * against the same events applied to the state alone, without the event log that makes rollbacks
 * exact — the ratio is the price of that log.
 *
 * PostgreSQL is test/support/postgres.ts's server (started here, stopped when the bench exits).
 *
 * Run: bun bench/directory.ts [--sizes 1000000] [--dbs sqlite,postgres] [--rounds 3] [--per-class 40]
 *                             [--cutoff N] [--parts search,indexing] [--events 100000] [--batch 500]
 */
import type { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getAddress, type Address } from "viem";
import type { IndexedEvent } from "../src/chain/indexer.ts";
import { openDatabase } from "../src/db/open.ts";
import { openPostgres } from "../src/db/postgres.ts";
import type { Sql } from "../src/db/sql.ts";
import { toDirectoryEvent } from "../src/directory/events.ts";
import { directoryConsumer } from "../src/directory/indexer.ts";
import { directorySearch } from "../src/directory/search.ts";
import { directoryState } from "../src/directory/state.ts";
import { keywordText, normalize } from "../src/directory/text.ts";
import { canonicalDid } from "../src/identity/did.ts";
import { postgres } from "../test/support/postgres.ts";
import { benchArgs, compareMany, fmt, loadAverage, percentile } from "./harness.ts";

const args = benchArgs("Directory search per query class at a million entries, on SQLite and PostgreSQL; the indexing rate against the state alone.", {
  sizes: { default: "1000000", help: "entry counts to measure, comma-separated" },
  dbs: { default: "sqlite,postgres", help: "databases, comma-separated" },
  parts: { default: "search,indexing", help: "what to measure, comma-separated" },
  rounds: { default: "3", help: "measured rounds" },
  "per-class": { default: "40", help: "queries per query class and round" },
  cutoff: { help: "the document-frequency cutoff to search with (default: the server's, search.ts DF_CUTOFF)" },
  events: { default: "100000", help: "events for the indexing part" },
  batch: { default: "500", help: "events per indexing batch" },
});
const sizes = args.sizes.split(",").map(Number);
const rounds = Number(args.rounds);
const perClass = Number(args["per-class"]);
const cutoff = args.cutoff === undefined ? undefined : Number(args.cutoff);
const dbs = args.dbs.split(",");
const parts = args.parts.split(",");
for (const d of dbs) if (d !== "sqlite" && d !== "postgres") throw new Error("--dbs: sqlite, postgres or both");
const eventCount = Number(args.events);
const batch = Number(args.batch);
for (const n of [...sizes, rounds, perClass, eventCount, batch, ...(cutoff === undefined ? [] : [cutoff])]) if (!(Number.isInteger(n) && n > 0)) throw new Error("every option must be a positive integer");

const CHAIN_ID = 985;
const progress = (line: string) => process.stderr.write(`${line}\n`);
const scratch = mkdtempSync(join(tmpdir(), "stowage-bench-directory-"));
process.on("exit", () => rmSync(scratch, { recursive: true, force: true }));
let dbSerial = 0;
const freshDb = () => openDatabase(join(scratch, `d${++dbSerial}.db`));

// ───────────────────────────── synthetic data ─────────────────────────────

/** Deterministic (mulberry32): every run benches the same corpus and queries. */
function prng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = prng(42);
const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)] as T;

const SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qui", "bro", "dal", "fen", "gor", "hal", "jin", "mor", "nal", "pri", "ster", "tho", "ul", "vex", "wyn", "xa", "yor", "zil", "caf", "rés"];
/** 20 000 distinct words; some carry accents ("rés…", "…é"). */
const VOCAB = (() => {
  const words = new Set<string>();
  while (words.size < 20_000) {
    let w = "";
    const n = 2 + Math.floor(rand() * 3);
    for (let i = 0; i < n; i++) w += pick(SYLLABLES);
    if (rand() < 0.05) w += "é";
    words.add(w);
  }
  return [...words];
})();
/** Zipf-like (s ≈ 1): word k drawn with probability ∝ 1/(k+1); a few words are everywhere. */
const zipfWord = (() => {
  const weights = VOCAB.map((_, k) => 1 / (k + 1));
  const total = weights.reduce((s, w) => s + w, 0);
  const cumulative = new Float64Array(VOCAB.length);
  let acc = 0;
  for (let i = 0; i < VOCAB.length; i++) cumulative[i] = acc += (weights[i] as number) / total;
  return () => {
    const x = rand();
    let lo = 0;
    let hi = VOCAB.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((cumulative[mid] as number) < x) lo = mid + 1;
      else hi = mid;
    }
    return VOCAB[lo] as string;
  };
})();
const words = (n: number) => Array.from({ length: n }, zipfWord);
const cap = (w: string) => w.charAt(0).toUpperCase() + w.slice(1);
const owners: Address[] = Array.from({ length: 2000 }, (_, i) => getAddress(`0x${(i + 1).toString(16).padStart(40, "0")}`));
const cidFor = (i: number) => `bafkreibench${i.toString(36).padStart(12, "0")}`;

/** One synthetic entry: what both databases are filled with, the same for each. */
interface Row {
  owner: Address;
  did: string;
  cid: string;
  name: string;
  keywords: string[];
  stored: boolean;
  price: string;
  isPublic: boolean;
}
/** N entries (90 % stored by their owner, so the stored-filter has something to drop). */
export function corpus(size: number): Row[] {
  const rows: Row[] = [];
  for (let i = 0; i < size; i++) {
    const owner = owners[i % owners.length] as Address;
    const name = words(2 + Math.floor(rand() * 4)).map(cap).join(" ");
    const keywords = words(1 + Math.floor(rand() * 4));
    rows.push({ owner, did: canonicalDid(owner, CHAIN_ID), cid: cidFor(i), name, keywords, stored: rand() < 0.9, price: String(Math.floor(rand() * 1000)), isPublic: rand() < 0.5 });
  }
  return rows;
}

/** Entries, FTS5 rows and stored files straight into SQLite, one transaction per 100k. */
export function fillSqlite(sqlite: Database, rows: readonly Row[]) {
  const bucket = sqlite.prepare("INSERT INTO buckets (did, created_at) VALUES (?, 0) ON CONFLICT DO NOTHING");
  const file = sqlite.prepare("INSERT INTO files (did, backend, name, cid, size, mod_time) VALUES (?, 'dfs', ?, ?, 1000, 0)");
  const entry = sqlite.prepare("INSERT INTO directory_entries (id, owner, mid, did, cid, name, size, price, public, keywords, block) VALUES (?, ?, ?, ?, ?, ?, '1000', ?, ?, ?, ?)");
  // The FTS5 row as sqliteText.put writes it (search-sqlite.ts), bound synchronously here for speed.
  const fts = sqlite.prepare("INSERT INTO directory_fts (rowid, name, keywords) VALUES (?, ?, ?)");
  sqlite.transaction(() => {
    for (const o of owners) bucket.run(canonicalDid(o, CHAIN_ID));
  })();
  for (let from = 0; from < rows.length; from += 100_000) {
    sqlite.transaction(() => {
      for (let i = from; i < Math.min(rows.length, from + 100_000); i++) {
        const r = rows[i] as Row;
        if (r.stored) file.run(r.did, `f${i}`, r.cid);
        entry.run(i + 1, r.owner, r.cid, r.did, r.cid, r.name, r.price, r.isPublic ? 1 : 0, JSON.stringify(r.keywords), i);
        fts.run(i + 1, normalize(r.name), keywordText(r.keywords));
      }
    })();
  }
  sqlite.exec("ANALYZE");
}

/** The same rows into PostgreSQL, 5,000 per statement (json_to_recordset). The table's secondary
 * indexes (whatever the migrations made: the GIN search index among them) are dropped first and
 * rebuilt from their own definitions afterwards: building them once is minutes faster. So is
 * counting the vocabulary (directory_terms) once, as migration 0014 does, instead of its
 * trigger's upserts for every row. */
export async function fillPostgres(sql: Sql, rows: readonly Row[]) {
  const indexes = await sql.all<{ name: string; def: string }>("SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE tablename = 'directory_entries' AND indexname <> 'directory_entries_pkey'");
  for (const i of indexes) await sql.run(`DROP INDEX ${i.name}`);
  await sql.run("ALTER TABLE directory_entries DISABLE TRIGGER directory_entries_terms");
  await sql.run(`INSERT INTO buckets (did, created_at) SELECT did, 0 FROM json_array_elements_text($1::text::json) AS did ON CONFLICT DO NOTHING`, [JSON.stringify(owners.map((o) => canonicalDid(o, CHAIN_ID)))]);
  const STEP = 5000;
  for (let from = 0; from < rows.length; from += STEP) {
    const part = rows.slice(from, from + STEP).map((r, k) => ({ id: from + k + 1, owner: r.owner, mid: r.cid, did: r.did, cid: r.cid, name: r.name, price: r.price, public: r.isPublic, keywords: JSON.stringify(r.keywords), block: from + k, stored: r.stored }));
    const json = JSON.stringify(part);
    await sql.run(
      `INSERT INTO directory_entries (id, owner, mid, did, cid, name, size, price, public, keywords, block)
       SELECT id, owner, mid, did, cid, name, '1000', price, public, keywords, block
       FROM json_to_recordset($1::text::json) AS x(id int8, owner text, mid text, did text, cid text, name text, price text, public boolean, keywords text, block int8)`,
      [json],
    );
    await sql.run(
      `INSERT INTO files (did, backend, name, cid, size, mod_time)
       SELECT did, 'dfs', 'f' || id, cid, 1000, 0
       FROM json_to_recordset($1::text::json) AS x(id int8, did text, cid text, stored boolean) WHERE stored`,
      [json],
    );
    if (from % 100_000 === 0 && from > 0) progress(`  postgres: ${from.toLocaleString("en-US")} rows`);
  }
  progress(`  postgres: rows in; building ${indexes.map((i) => i.name).join(", ")}`);
  for (const i of indexes) await sql.run(i.def);
  await sql.run("ALTER TABLE directory_entries ENABLE TRIGGER directory_entries_terms");
  await sql.run(
    `INSERT INTO directory_terms (term, docs, name_docs)
     SELECT l.lexeme, count(*), count(*) FILTER (WHERE 'A' = ANY (l.weights)) FROM directory_entries e, unnest(e.search) AS l GROUP BY l.lexeme`,
  );
  // Gathers statistics (and sets the visibility map), as autovacuum would in time.
  await sql.run("VACUUM ANALYZE directory_entries");
  await sql.run("VACUUM ANALYZE files");
  await sql.run("VACUUM ANALYZE directory_terms");
}

const CLASSES = ["rare word", "common word", "middle word", "two words", "word + prefix", "3-letter prefix", "5-letter prefix", "accented, other case", "no query (newest)"] as const;
type QueryClass = (typeof CLASSES)[number];
/** `perClass` queries of each class. Common = the 20 most frequent words (each in ≈ 5–10 % of the
 * entries); middle = ranks 20–2000, where names and keywords both match and the ranking decides.
 * FTS5's prefix indexes cover 2 and 3 letters (migration 0008); 5 letters is the costly prefix. */
export function querySet(perClass: number): { kind: QueryClass; text: string }[] {
  const out: { kind: QueryClass; text: string }[] = [];
  const accented = VOCAB.filter((w) => w.includes("é") || w.startsWith("rés"));
  for (const kind of CLASSES) {
    for (let i = 0; i < perClass; i++) {
      const text =
        kind === "rare word" ? (VOCAB[2000 + Math.floor(rand() * 18_000)] as string)
        : kind === "common word" ? (VOCAB[Math.floor(rand() * 20)] as string)
        : kind === "middle word" ? (VOCAB[20 + Math.floor(rand() * 1980)] as string)
        : kind === "two words" ? `${zipfWord()} ${zipfWord()}`
        : kind === "word + prefix" ? `${zipfWord()} ${zipfWord().slice(0, 3)}`
        : kind === "3-letter prefix" ? zipfWord().slice(0, 3)
        : kind === "5-letter prefix" ? zipfWord().slice(0, 5)
        : kind === "accented, other case" ? pick(accented).toUpperCase()
        : "";
      out.push({ kind, text });
    }
  }
  return out;
}

// ───────────────────────────── search ─────────────────────────────

type Search = ReturnType<typeof directorySearch>;
/** Latencies per class over `rounds` passes (queries shuffled per pass), after one warm-up pass. */
async function timeClasses(search: Search, queries: readonly { kind: QueryClass; text: string }[]) {
  const ms = new Map<QueryClass, number[]>(CLASSES.map((k) => [k, []]));
  const roundP99 = new Map<QueryClass, number[]>(CLASSES.map((k) => [k, []]));
  const hits = new Map<QueryClass, number>(CLASSES.map((k) => [k, 0]));
  for (let round = 0; round <= rounds; round++) {
    const order = [...queries].sort(() => rand() - 0.5);
    const mine = new Map<QueryClass, number[]>(CLASSES.map((k) => [k, []]));
    for (const q of order) {
      const t0 = performance.now();
      const n = (await search({ query: q.text, page: "1", size: "20" })).length;
      const t = performance.now() - t0;
      if (round === 0) continue; // warm-up
      (mine.get(q.kind) as number[]).push(t);
      hits.set(q.kind, (hits.get(q.kind) as number) + n);
    }
    if (round === 0) continue;
    for (const k of CLASSES) {
      const xs = (mine.get(k) as number[]).sort((a, b) => a - b);
      (ms.get(k) as number[]).push(...xs);
      (roundP99.get(k) as number[]).push(percentile(xs, 99));
    }
  }
  return CLASSES.map((kind) => {
    const xs = Float64Array.from(ms.get(kind) as number[]).sort();
    const p99s = roundP99.get(kind) as number[];
    return { kind, p50: percentile(xs, 50), p99: percentile(xs, 99), p99min: Math.min(...p99s), p99max: Math.max(...p99s), hits: (hits.get(kind) as number) / xs.length };
  });
}

async function benchSearch(size: number) {
  progress(`generating ${size.toLocaleString("en-US")} entries …`);
  const rows = corpus(size);
  const queries = querySet(perClass);
  const results: { db: string; classes: Awaited<ReturnType<typeof timeClasses>> }[] = [];
  for (const db of dbs) {
    const t0 = performance.now();
    let sql: Sql;
    let close: () => Promise<void>;
    if (db === "sqlite") {
      const database = freshDb();
      fillSqlite(database.sqlite, rows);
      sql = database.sql;
      close = async () => database.close();
    } else {
      const pg = await postgres();
      const opened = await openPostgres(await pg.createDatabase());
      await fillPostgres(opened.sql, rows);
      sql = opened.sql;
      close = () => opened.close();
    }
    progress(`${db}: built in ${((performance.now() - t0) / 1000).toFixed(1)} s; measuring …`);
    results.push({ db, classes: await timeClasses(directorySearch(sql, cutoff === undefined ? {} : { cutoff }), queries) });
    await close();
  }
  const table: string[][] = [["query class", "database", "p50 ms", "p99 ms", "p99 of each round", "hits/query"]];
  for (const kind of CLASSES) {
    for (const r of results) {
      const c = r.classes.find((x) => x.kind === kind) as (typeof r.classes)[number];
      table.push([r === results[0] ? kind : "", r.db, fmt(c.p50), fmt(c.p99), `${fmt(c.p99min)}–${fmt(c.p99max)}`, fmt(c.hits)]);
    }
  }
  const widths = (table[0] as string[]).map((_, c) => Math.max(...table.map((r) => (r[c] as string).length)));
  const text = table.map((r) => r.map((cell, c) => (c < 2 ? cell.padEnd(widths[c] as number) : cell.padStart(widths[c] as number))).join("  ")).join("\n");
  process.stdout.write(`search, ${size.toLocaleString("en-US")} entries${cutoff === undefined ? "" : `, cutoff ${cutoff}`}: ${perClass} queries per class × ${rounds} rounds (+1 warm-up), page 1 of 20, load average ${loadAverage()}\n${text}\n`);
}

// ───────────────────────────── indexing ─────────────────────────────

/** A stream of decoded events as the indexer hands them over: mostly publishes, and updates,
 * grants, purchases, revokes and unpublishes of what was published. */
function syntheticEvents(n: number): IndexedEvent[] {
  const r = prng(7);
  const live: { owner: Address; mid: string; readers: Address[] }[] = [];
  const out: IndexedEvent[] = [];
  const readerOf = (i: number) => getAddress(`0x${(0xabc0000 + i).toString(16).padStart(40, "0")}`);
  for (let i = 0; i < n; i++) {
    const at = { blockNumber: BigInt(1 + Math.floor(i / 4)), logIndex: i % 4, transactionHash: `0x${i.toString(16).padStart(64, "0")}` as const, address: owners[0] as Address };
    const x = r();
    const target = live.length > 0 ? live[Math.floor(r() * live.length)] : undefined;
    const fields = () => ({ name: words(3).map(cap).join(" "), size: 1000n, price: BigInt(Math.floor(r() * 100)), isPublic: r() < 0.5, keywords: words(3) });
    if (!target || x < 0.5) {
      const owner = owners[i % owners.length] as Address;
      const entry = { owner, mid: cidFor(i), readers: [] as Address[] };
      live.push(entry);
      out.push({ ...at, eventName: "Published", args: { owner, mid: entry.mid, ...fields() } });
    } else if (x < 0.65) {
      out.push({ ...at, eventName: "Updated", args: { owner: target.owner, mid: target.mid, ...fields() } });
    } else if (x < 0.8) {
      const reader = readerOf(i);
      target.readers.push(reader);
      out.push({ ...at, eventName: "ReadGranted", args: { owner: target.owner, mid: target.mid, reader } });
    } else if (x < 0.9) {
      out.push({ ...at, eventName: "ReadBought", args: { owner: target.owner, mid: target.mid, reader: readerOf(i), paid: 5_000_000_000n } });
    } else if (x < 0.95 && target.readers.length > 0) {
      out.push({ ...at, eventName: "ReadRevoked", args: { owner: target.owner, mid: target.mid, reader: target.readers.pop() as Address } });
    } else {
      live.splice(live.indexOf(target), 1);
      out.push({ ...at, eventName: "Unpublished", args: { owner: target.owner, mid: target.mid } });
    }
  }
  return out;
}

async function applyAll(events: IndexedEvent[], withLog: boolean): Promise<number> {
  const database = freshDb();
  const consumer = directoryConsumer({ chainId: CHAIN_ID, address: owners[0] as Address, fromBlock: 0n });
  const state = directoryState(CHAIN_ID);
  const t0 = performance.now();
  for (let i = 0; i < events.length; i += batch) {
    const range = events.slice(i, i + batch);
    await database.sql.tx(async (tx) => {
      if (withLog) await consumer.apply(tx, range);
      else for (const e of range) await state.applyEvent(tx, toDirectoryEvent(e) as NonNullable<ReturnType<typeof toDirectoryEvent>>);
    });
  }
  const seconds = (performance.now() - t0) / 1000;
  database.close();
  return events.length / seconds;
}

async function benchIndexing() {
  const events = syntheticEvents(eventCount);
  return compareMany({
    name: `indexing, ${eventCount.toLocaleString("en-US")} events in ranges of ${batch}`,
    rounds,
    labels: { subject: "consumer", baseline: "state-only" },
    metrics: { rate: { unit: "events/s", higherIsBetter: true, label: "indexing rate" } },
    subject: async () => ({ rate: await applyAll(events, true) }),
    baseline: async () => ({ rate: await applyAll(events, false) }),
  });
}

// ───────────────────────────── main ─────────────────────────────

if (import.meta.main) {
  process.stdout.write(`stowage directory benchmark — Bun ${Bun.version}, ${new Date().toISOString()}\n\n`);
  if (parts.includes("indexing")) {
    await benchIndexing();
    process.stdout.write("\n");
  }
  if (parts.includes("search")) {
    for (const size of sizes) {
      await benchSearch(size);
      process.stdout.write("\n");
    }
  }
  if (dbs.includes("postgres") && parts.includes("search")) await (await postgres()).stop();
}
