/**
 * The file directory: search latency at 100k and 1M entries, and the indexing rate, each side by
 * side with a baseline, in alternating rounds (bench/README.md).
 *
 * Search: the service behind GET /challenge (FTS5 MATCH, bm25 order, the join that keeps only
 * entries whose owner stores the Cid) against the plain query one would write without FTS5:
 * `LIKE '%word%'` over names and keywords with the same join, newest first. The baseline is
 * cheaper in kind (no ranking, no prefix per word, ASCII-only case folding, no accents) and
 * stops early once it has a page of a common word; FTS5 ranks every match. A query set mixes
 * rare words, common words, two-word queries, 3-letter prefixes and accented spellings, drawn
 * from a Zipf-distributed vocabulary; per round, median and p99 over all queries.
 *
 * Indexing: synthetic decoded Directory events (publish, update, grant, revoke, buy, unpublish)
 * applied through the real consumer, in ranges of `--batch` events per transaction (as the
 * indexer commits one block range per transaction), into a fresh database each round; against
 * the same events applied to the state alone, without the event log that makes rollbacks exact —
 * the ratio is the price of that log.
 *
 * The corpus is written straight into SQLite (entries, FTS5 rows, stored files) in one
 * transaction, so building 1M entries takes a minute, not a million transactions.
 *
 * Run: bun bench/directory.ts [--sizes 100000,1000000] [--rounds 5] [--queries 200] [--events 100000] [--batch 500]
 */
import type { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { getAddress, type Address } from "viem";
import type { IndexedEvent } from "../src/chain/indexer.ts";
import { openDatabase } from "../src/db/open.ts";
import { toDirectoryEvent } from "../src/directory/events.ts";
import { directoryConsumer } from "../src/directory/indexer.ts";
import { directorySearch } from "../src/directory/search.ts";
import { directoryState } from "../src/directory/state.ts";
import { keywordText, matchExpression, normalize } from "../src/directory/text.ts";
import { canonicalDid } from "../src/identity/did.ts";
import { compareMany, fmt, percentile } from "./harness.ts";

const { values: args } = parseArgs({
  options: {
    sizes: { type: "string", default: "100000,1000000" },
    rounds: { type: "string", default: "5" },
    queries: { type: "string", default: "200" },
    events: { type: "string", default: "100000" },
    batch: { type: "string", default: "500" },
  },
  strict: true,
});
const sizes = args.sizes.split(",").map(Number);
const rounds = Number(args.rounds);
const queriesPerRound = Number(args.queries);
const eventCount = Number(args.events);
const batch = Number(args.batch);
for (const n of [...sizes, rounds, queriesPerRound, eventCount, batch]) if (!(Number.isInteger(n) && n > 0)) throw new Error("every option must be a positive integer");

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

/** N entries (90 % stored by their owner, so the join has something to drop), with files rows. */
function fillCorpus(sqlite: Database, from: number, to: number) {
  const bucket = sqlite.prepare("INSERT INTO buckets (did, created_at) VALUES (?, 0) ON CONFLICT DO NOTHING");
  const file = sqlite.prepare("INSERT INTO files (did, backend, name, cid, size, mod_time) VALUES (?, 'dfs', ?, ?, 1000, 0)");
  const entry = sqlite.prepare("INSERT INTO directory_entries (id, owner, mid, did, cid, name, size, price, public, keywords, block) VALUES (?, ?, ?, ?, ?, ?, '1000', ?, ?, ?, ?)");
  const fts = sqlite.prepare("INSERT INTO directory_fts (rowid, name, keywords) VALUES (?, ?, ?)");
  sqlite.transaction(() => {
    for (const o of owners) bucket.run(canonicalDid(o, CHAIN_ID));
    for (let i = from; i < to; i++) {
      const owner = owners[i % owners.length] as Address;
      const did = canonicalDid(owner, CHAIN_ID);
      const cid = cidFor(i);
      const name = words(2 + Math.floor(rand() * 4)).map(cap).join(" ");
      const keywords = words(1 + Math.floor(rand() * 4));
      if (rand() < 0.9) file.run(did, `f${i}`, cid);
      entry.run(i + 1, owner, cid, did, cid, name, String(Math.floor(rand() * 1000)), rand() < 0.5 ? 1 : 0, JSON.stringify(keywords), i);
      fts.run(i + 1, normalize(name), keywordText(keywords));
    }
  })();
}

type QueryClass = "rare word" | "common word" | "two words" | "3-letter prefix" | "accented, other case";
function querySet(n: number): { kind: QueryClass; text: string }[] {
  const out: { kind: QueryClass; text: string }[] = [];
  const classes: QueryClass[] = ["rare word", "common word", "two words", "3-letter prefix", "accented, other case"];
  const accented = VOCAB.filter((w) => w.includes("é") || w.startsWith("rés"));
  for (let i = 0; i < n; i++) {
    const kind = classes[i % classes.length] as QueryClass;
    const text =
      kind === "rare word" ? (VOCAB[2000 + Math.floor(rand() * 18_000)] as string)
      : kind === "common word" ? (VOCAB[Math.floor(rand() * 20)] as string)
      : kind === "two words" ? `${zipfWord()} ${zipfWord()}`
      : kind === "3-letter prefix" ? zipfWord().slice(0, 3)
      : pick(accented).toUpperCase();
    out.push({ kind, text });
  }
  return out;
}

// ───────────────────────────── search ─────────────────────────────

function likeSearch(sqlite: Database) {
  const q = sqlite.prepare<{ mid: string }, [string, string, number]>(
    `SELECT e.owner, e.mid, e.name, e.size, e.price, e.public, e.keywords FROM directory_entries e
     WHERE (e.name LIKE ? OR e.keywords LIKE ?)
       AND EXISTS (SELECT 1 FROM files f WHERE f.backend IN ('dfs', 'ipfs') AND f.cid = e.cid AND f.did = e.did)
     ORDER BY e.id DESC LIMIT ?`,
  );
  return (text: string) => {
    const first = text.split(/\s+/)[0] as string;
    return q.all(`%${first}%`, `%${first}%`, 20);
  };
}

/** What search.ts did first, for information: one statement that joins every match before sorting. */
function oneQuerySearch(sqlite: Database) {
  const q = sqlite.prepare<{ mid: string }, [string]>(
    `SELECT e.owner, e.mid, e.name, e.size, e.price, e.public, e.keywords FROM directory_fts JOIN directory_entries e ON e.id = directory_fts.rowid
     WHERE directory_fts MATCH ? AND EXISTS (SELECT 1 FROM files f WHERE f.backend IN ('dfs', 'ipfs') AND f.cid = e.cid AND f.did = e.did)
     ORDER BY directory_fts.rank, e.id LIMIT 20`,
  );
  return (text: string) => {
    const match = matchExpression(text);
    return match ? q.all(match) : [];
  };
}

async function timeQueries(run: (text: string) => unknown[] | Promise<unknown[]>, queries: { kind: QueryClass; text: string }[]) {
  const ms = new Float64Array(queries.length);
  let hits = 0;
  for (let i = 0; i < queries.length; i++) {
    const t0 = performance.now();
    hits += (await run((queries[i] as { text: string }).text)).length;
    ms[i] = performance.now() - t0;
  }
  return { ms, hits };
}
const summary = (ms: Float64Array) => {
  const sorted = Float64Array.from(ms).sort();
  return { median: percentile(sorted, 50), p99: percentile(sorted, 99) };
};

async function benchSearch(size: number) {
  progress(`building ${size.toLocaleString("en-US")} entries …`);
  const database = freshDb();
  const t0 = performance.now();
  for (let from = 0; from < size; from += 100_000) fillCorpus(database.sqlite, from, Math.min(size, from + 100_000));
  progress(`built in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  database.sqlite.exec("ANALYZE");
  const search = directorySearch(database.sql);
  const fts = (text: string) => search({ query: text, page: "1", size: "20" });
  const like = likeSearch(database.sqlite);
  const queries = querySet(queriesPerRound);

  const result = await compareMany({
    name: `search, ${size.toLocaleString("en-US")} entries (${queriesPerRound} queries per round)`,
    rounds,
    labels: { subject: "fts5", baseline: "like" },
    metrics: {
      median: { unit: "ms", higherIsBetter: false, label: "median latency" },
      p99: { unit: "ms", higherIsBetter: false, label: "p99 latency" },
    },
    subject: async () => summary((await timeQueries(fts, queries)).ms),
    baseline: async () => summary((await timeQueries(like, queries)).ms),
  });

  // One more pass per class, for information: where the time goes.
  const oneQuery = oneQuerySearch(database.sqlite);
  const rows: string[][] = [["query class", "", "median ms", "p99 ms", "hits/query"]];
  for (const kind of ["rare word", "common word", "two words", "3-letter prefix", "accented, other case"] as QueryClass[]) {
    const subset = queries.filter((q) => q.kind === kind);
    for (const [label, run] of [["fts5", fts], ["fts5, one statement", oneQuery], ["like", like]] as const) {
      const t = await timeQueries(run, subset);
      const s = summary(t.ms);
      rows.push([label === "fts5" ? kind : "", label, fmt(s.median), fmt(s.p99), fmt(t.hits / subset.length)]);
    }
  }
  const widths = (rows[0] as string[]).map((_, c) => Math.max(...rows.map((r) => (r[c] as string).length)));
  const table = rows.map((r) => r.map((cell, c) => (c < 2 ? cell.padEnd(widths[c] as number) : cell.padStart(widths[c] as number))).join("  ")).join("\n");
  process.stdout.write(`by query class, one pass each (fts5, one statement = every match joined before sorting, no rank window):\n${table}\n\n`);
  database.close();
  return result;
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

process.stdout.write(`stowage directory benchmark — Bun ${Bun.version}, ${new Date().toISOString()}\n\n`);
await benchIndexing();
process.stdout.write("\n");
for (const size of sizes) {
  await benchSearch(size);
  process.stdout.write("\n");
}
