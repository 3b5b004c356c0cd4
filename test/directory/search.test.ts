/**
 * GET /challenge over a corpus published on a real chain and indexed by the real consumer, on the
 * database of this pass (FTS5 + bm25 on SQLite, tsvector + ts_rank on PostgreSQL): ranking,
 * prefixes, accents, case, names vs keywords, paging and its limits, and user input that looks
 * like FTS5 or tsquery syntax.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { directoryAbi } from "../../src/chain/artifacts/index.ts";
import { newestOfTier, TIERS, tierSpan, tsqueryText } from "../../src/directory/search-pg.ts";
import { directorySearch } from "../../src/directory/search.ts";
import type { SearchResult } from "../../src/sdk/directory.ts";
import { mined } from "../support/anvil.ts";
import { readJson } from "../support/app.ts";
import { directoryGateway } from "./support.ts";

const dg = await directoryGateway({ ipfs: false });
const { anvil, context } = dg.gw.chain;

const GHOSTS = 20;
const CORPUS: [name: string, keywords: string[]][] = [
  // Published (and so numbered) before the entries that must outrank them: ties break by entry
  // id, so only the ranking itself can put the later ones first.
  ["Harbour chart", ["sunset", "nautical"]],
  ["Sunset harbour", ["photo", "evening"]],
  ["Red bicycle", ["vehicle"]],
  ["Red car", ["vehicle"]],
  ["Résumé café", ["cv"]],
  ["resume template", ["docs"]],
  ["Orchard notes", ["apples"]],
  ["Nearby shops", ["town"]],
  // A word in two names and, newer, in two entries' keywords only.
  ["Lantern festival", ["night"]],
  ["Paper crafts", ["lantern"]],
  ["Lantern repair", ["tools"]],
  ["Garden lights", ["lantern", "outdoor"]],
  ...Array.from({ length: 14 }, (_, i): [string, string[]] => [`Paging item ${String(i + 1).padStart(2, "0")}`, ["paging"]]),
];

beforeAll(async () => {
  const owner = await dg.user();
  const wallet = anvil.wallet(owner.account);
  for (const [name, keywords] of CORPUS) {
    const file = await owner.store.upload("dfs", new TextEncoder().encode(`${name} ${crypto.randomUUID()}`), { name: `${name}.bin` });
    await mined(anvil.publicClient, wallet.writeContract({ address: context.contracts.directory, abi: directoryAbi, functionName: "publish", args: [file.Cid, name, BigInt(file.Size), 0n, true, keywords] }));
  }
  // Entries for Cids their owner does not store: better matches for "paging" (shorter names),
  // so the search must look past them, widening its candidates, to fill a page.
  const ghost = anvil.wallet((await dg.user()).account);
  for (let i = 0; i < GHOSTS; i++) {
    await mined(anvil.publicClient, ghost.writeContract({ address: context.contracts.directory, abi: directoryAbi, functionName: "publish", args: [`ghost-${i}-${crypto.randomUUID()}`, "Paging", 1n, 0n, true, ["paging"]] }));
  }
  // The newest "lantern" name of all, not stored: newest-first listings must skip it too.
  await mined(anvil.publicClient, ghost.writeContract({ address: context.contracts.directory, abi: directoryAbi, functionName: "publish", args: [`ghost-lantern-${crypto.randomUUID()}`, "Lantern", 1n, 0n, true, []] }));
  await dg.sync();
});

async function search(params: Record<string, string>): Promise<SearchResult[]> {
  const res = await dg.challenge(`?${new URLSearchParams(params)}`);
  expect(res.status).toBe(200);
  return readJson(res);
}
const names = async (query: string, more: Record<string, string> = {}) => (await search({ query, ...more })).map((r) => r.Name);

describe("directory search", () => {
  test("a name match ranks above a keyword match; more matching words rank first", async () => {
    expect(await names("sunset")).toEqual(["Sunset harbour", "Harbour chart"]);
    expect(await names("red car")).toEqual(["Red car", "Red bicycle"]);
    expect(await names("vehicle car")).toEqual(["Red car", "Red bicycle"]);
  });

  test("prefixes, accents both ways, and case", async () => {
    expect(await names("harb")).toEqual(expect.arrayContaining(["Sunset harbour", "Harbour chart"]));
    expect(await names("sun")).toEqual(await names("sunset"));
    expect((await names("resume")).sort()).toEqual(["Résumé café", "resume template"]);
    expect((await names("résumé")).sort()).toEqual(["Résumé café", "resume template"]);
    expect((await names("RÉSU")).sort()).toEqual(["Résumé café", "resume template"]);
    expect(await names("cafe")).toEqual(["Résumé café"]);
    expect(await names("ＣＡＦＥ")).toEqual(["Résumé café"]); // full-width letters fold too
    expect(await names("SUNSET")).toEqual(await names("sunset"));
  });

  test("keywords are searched as well as names", async () => {
    expect((await names("vehicle")).sort()).toEqual(["Red bicycle", "Red car"]);
    expect(await names("apples")).toEqual(["Orchard notes"]);
    expect(await names("nautical")).toEqual(["Harbour chart"]);
    expect(await names("nothing-like-this")).toEqual([]);
  });

  test("answers spec 2.7 objects (plus Owner)", async () => {
    const [hit] = await search({ query: "orchard" });
    expect(Object.keys(hit as object).sort()).toEqual(["Mid", "Name", "Owner", "Price", "Public", "Size", "keywords"]);
    expect(hit).toMatchObject({ Name: "Orchard notes", Public: true, Price: 0, keywords: ["apples"] });
    expect(typeof hit?.Size).toBe("number");
  });

  test("pages are 1-based and do not overlap; size defaults to 20", async () => {
    const pages = [await names("paging", { size: "5", page: "1" }), await names("paging", { size: "5", page: "2" }), await names("paging", { size: "5", page: "3" })];
    expect(pages.map((p) => p.length)).toEqual([5, 5, 4]);
    const all = pages.flat();
    expect(new Set(all).size).toBe(14);
    expect(all.sort()).toEqual(CORPUS.filter(([n]) => n.startsWith("Paging")).map(([n]) => n));
    expect(await names("paging", { size: "5", page: "4" })).toEqual([]);
    expect(await names("paging", { size: "5" })).toEqual(pages[0] as string[]);
    // No query lists everything stored, newest first: 26 entries, 20 on the first page.
    expect(await search({})).toHaveLength(20);
    expect(await search({ page: "2" })).toHaveLength(6);
    expect((await search({ size: "1" }))[0]?.Name).toBe("Paging item 14");
    expect(await search({ page: "1000", size: "100" })).toEqual([]);
  });

  test("entries whose owner does not store the Cid never show, however well they match", async () => {
    expect(await names("paging", { size: "1" })).toEqual([expect.stringMatching(/^Paging item /)]);
    expect((await search({ query: "paging", size: "100" })).every((r) => r.Name !== "Paging")).toBe(true);
    expect(await search({ query: "paging", size: "100" })).toHaveLength(14);
  });

  test("a query with more matches than the document-frequency cutoff lists its stored matches newest first", async () => {
    const cut = directorySearch(dg.sql, { cutoff: 25 });
    // 34 entries match "paging" (the 20 newest not stored): every stored one, newest first.
    expect((await cut({ query: "paging", size: "100" })).map((r) => r.Name)).toEqual(Array.from({ length: 14 }, (_, i) => `Paging item ${String(14 - i).padStart(2, "0")}`));
    // Narrower queries are ranked over all their matches, as before.
    expect((await cut({ query: "sunset" })).map((r) => r.Name)).toEqual(["Sunset harbour", "Harbour chart"]);
  });

  test("name matches come before keyword-only ones, ranked or listed newest first, and pages run across the two", async () => {
    // 5 matches (one not stored). At or under the cutoff: ranked; equal scores keep publication order.
    const ranked = ["Lantern festival", "Lantern repair", "Paper crafts", "Garden lights"];
    expect(await names("lantern")).toEqual(ranked);
    expect((await directorySearch(dg.sql, { cutoff: 5 })({ query: "lantern" })).map((r) => r.Name)).toEqual(ranked);
    // Over it: newest first within each group, the unstored newest name skipped.
    const common = directorySearch(dg.sql, { cutoff: 4 });
    const newest = ["Lantern repair", "Lantern festival", "Garden lights", "Paper crafts"];
    const listed = async (query: string, more: Record<string, string> = {}) => (await common({ query, ...more })).map((r) => r.Name);
    expect(await listed("lantern")).toEqual(newest);
    expect(await listed("LANT")).toEqual(newest); // the last word is a prefix here too
    for (let page = 1; page <= 4; page++) expect(await listed("lantern", { size: "1", page: String(page) })).toEqual([newest[page - 1] as string]);
    expect(await listed("lantern", { size: "3", page: "2" })).toEqual(["Paper crafts"]);
    expect(await listed("lantern", { size: "1", page: "5" })).toEqual([]);
  });

  test("the cutoff counts entries, not words: a query whose words each have few matches but together more is listed, one whose words share entries is ranked", async () => {
    // "harbour" names 2 entries and "lantern" is in 5 (one not stored): 7 matches, none shared.
    // Each word alone is under a cutoff of 6, together they are over it: newest first, names first.
    const listed = ["Lantern repair", "Lantern festival", "Sunset harbour", "Harbour chart", "Garden lights", "Paper crafts"];
    expect((await directorySearch(dg.sql, { cutoff: 6 })({ query: "harbour lantern" })).map((r) => r.Name)).toEqual(listed);
    expect((await directorySearch(dg.sql, { cutoff: 7 })({ query: "harbour lantern" })).map((r) => r.Name)).not.toEqual(listed);
    // "harbour" 2 + "chart" 1 = 3 word matches, but only 2 entries: under a cutoff of 2, so ranked
    // (both words first); over a cutoff of 1, so newest first.
    expect((await directorySearch(dg.sql, { cutoff: 2 })({ query: "harbour chart" })).map((r) => r.Name)).toEqual(["Harbour chart", "Sunset harbour"]);
    expect((await directorySearch(dg.sql, { cutoff: 1 })({ query: "harbour chart" })).map((r) => r.Name)).toEqual(["Sunset harbour", "Harbour chart"]);
  });

  // Registered in the PostgreSQL pass only (a test skipped elsewhere would count as skipped).
  if (dg.sql.dialect === "postgres") test("PostgreSQL: a listing tier read through ranges of the newest ids, widened from any span, finds what the walk finds", async () => {
    const lastId = (await dg.sql.get<{ n: number }>("SELECT max(id) AS n FROM directory_entries"))?.n as number;
    const mids = (rows: { mid: string }[]) => rows.map((r) => r.mid);
    let found = 0;
    for (const query of ["lantern", "paging", "sunset harb", "red car", "LANT", "paging lantern"]) {
      const any = tsqueryText(query) as string;
      const names = tsqueryText(query, "A") as string;
      for (const need of [1, 3, 20]) {
        const walked = [await newestOfTier(dg.sql, TIERS.names, [names], need, lastId, undefined), await newestOfTier(dg.sql, TIERS.keywordOnly, [any, names], need, lastId, undefined)];
        found += walked.flat().length;
        for (const span of [1, 5, 25, 30, lastId]) {
          expect(mids(await newestOfTier(dg.sql, TIERS.names, [names], need, lastId, span))).toEqual(mids(walked[0] ?? []));
          expect(mids(await newestOfTier(dg.sql, TIERS.keywordOnly, [any, names], need, lastId, span))).toEqual(mids(walked[1] ?? []));
        }
      }
    }
    expect(found).toBeGreaterThan(50);
  });

  test("PostgreSQL: a tier is read through a range of ids only where that reads fewer rows than a walk", () => {
    const million = 1_000_000;
    // A word just over the cutoff, in names and keywords alike: the walk would read ≈ 27,000 rows.
    expect(tierSpan(20, 727, 1303, million)).toBeGreaterThan(0);
    // A common word: the walk finds its page within a few hundred rows.
    expect(tierSpan(20, 27_637, 46_854, million)).toBeUndefined();
    // Rare in names but in 100,000 entries' keywords: a range would fetch every one of those in
    // its span to read their weights, so the walk is still the cheaper.
    expect(tierSpan(20, 50, 100_000, million)).toBeUndefined();
  });

  test("earlier words are whole words; only the last is a prefix", async () => {
    // "bicy" is no word of any entry, so only "car" matches; as the last word it is a prefix.
    expect(await names("bicy car")).toEqual(["Red car"]);
    expect((await names("car bicy")).sort()).toEqual(["Red bicycle", "Red car"]);
    expect(await names("harb sunset")).toEqual(["Sunset harbour", "Harbour chart"]);
    expect(await names("sunset harb")).toEqual(["Sunset harbour", "Harbour chart"]);
    expect(await names("orch notes")).toEqual(["Orchard notes"]);
    expect(await names("notes orch")).toEqual(["Orchard notes"]);
    // A repeated last word is still the prefix; accents and case fold in whole words as well.
    expect(await names("harb sunset harb")).toEqual(await names("sunset harb"));
    expect(await names("RESUME caf")).toEqual(["Résumé café", "resume template"]);
    expect(await names("resu template")).toEqual(["resume template"]);
  });

  test("page and size out of bounds or not numbers answer 400 in the storage error shape", async () => {
    const bad = ["page=0", "page=1001", "page=abc", "page=1.5", "page=-1", "page=1e2", "size=0", "size=101", "size=x", "size=%201", "page=99999999999999999999"];
    for (const q of bad) {
      const res = await dg.challenge(`?query=red&${q}`);
      expect({ q, status: res.status }).toEqual({ q, status: 400 });
      const body = await readJson(res);
      expect(body).toMatchObject({ Code: "InvalidArgument", HTTPStatusCode: 400 });
      expect(typeof body.Description).toBe("string");
    }
    const long = await dg.challenge(`?query=${"a".repeat(1025)}`);
    expect(long.status).toBe(400);
  });

  test("FTS5 and tsquery syntax in the query is taken as plain words, never as operators", async () => {
    const harmless = ['"', "*", "-", "(", ")", ":", "^", "+", "'", '""', "{}", ";DROP TABLE directory_entries;--", "&", "|", "!", "<->", ":*", "'':*"];
    for (const query of harmless) expect({ query, hits: await names(query) }).toEqual({ query, hits: [] });
    // Operators are words like any other: "OR" is the prefix of "Orchard", "NEAR" of "Nearby".
    expect(await names("OR")).toEqual(["Orchard notes"]);
    expect(await names("NEAR")).toEqual(["Nearby shops"]);
    expect(await names("AND")).toEqual([]);
    // Quotes, stars, minus signs, column filters and NOT do not change what is found.
    expect(await names('"sunset')).toEqual(["Sunset harbour", "Harbour chart"]);
    expect(await names("sunset*")).toEqual(["Sunset harbour", "Harbour chart"]);
    expect(await names("-sunset")).toEqual(["Sunset harbour", "Harbour chart"]);
    expect(await names("keywords:sunset")).toEqual(["Sunset harbour", "Harbour chart"]);
    expect(await names("red NOT car")).toEqual(["Red car", "Red bicycle"]);
    expect(await names("red car NOT")).toEqual(expect.arrayContaining(["Red car", "Red bicycle", "Orchard notes"]));
    expect(await names("NEAR(red car, 9)")).toEqual(["Red car", "Red bicycle"]);
    expect(await names("red car NEAR")).toEqual(expect.arrayContaining(["Red car", "Red bicycle", "Nearby shops"]));
    expect(await dg.sql.get("SELECT count(*) AS n FROM directory_entries")).toEqual({ n: CORPUS.length + GHOSTS + 1 });
  });
});
