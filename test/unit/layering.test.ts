/**
 * Clean layering: no import cycle between the top-level folders of src/ (a cycle makes
 * every folder in it one tangle that cannot be read, tested or replaced alone), and no HTTP type
 * below the storage routes: the back-ends and the storage service take and return plain values.
 *
 * Imports are read from the source text (static, dynamic and re-exports, type-only ones
 * included: they are dependencies too). Files directly in src/ (main, server, app, config, log)
 * wire the folders together and may import any of them, so they count as no folder.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

const SRC = resolve(import.meta.dir, "../../src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith(".ts") ? [path] : [];
  });
}

/** Strips comments (line and block) so an import shown in a doc comment does not count. */
const code = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");

const IMPORT = /(?:^|[;\s])(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']\s*\)/g;

/** The module specifiers a file imports. */
export function importsOf(text: string): string[] {
  return [...code(text).matchAll(IMPORT)].map((m) => (m[1] ?? m[2]) as string);
}

/** The top-level folder of src/ a file is in (`storage/dfs/put.ts` → `storage`), or undefined for src/*.ts. */
const folderOf = (file: string) => {
  const parts = relative(SRC, file).split(sep);
  return parts.length > 1 ? parts[0] : undefined;
};

/** Folder → folder edges, each with one file import that makes it (for the failure message). */
function folderGraph(files: string[]) {
  const edges = new Map<string, Map<string, string>>();
  for (const file of files) {
    const from = folderOf(file);
    if (!from) continue;
    for (const spec of importsOf(readFileSync(file, "utf8"))) {
      if (!spec.startsWith(".")) continue;
      const target = resolve(dirname(file), spec);
      if (!target.startsWith(SRC + sep)) continue;
      const to = folderOf(target);
      if (!to || to === from) continue;
      const out = edges.get(from) ?? new Map<string, string>();
      if (!out.has(to)) out.set(to, `${relative(SRC, file)} → ${spec}`);
      edges.set(from, out);
    }
  }
  return edges;
}

/** Every elementary cycle's folders, found by a depth-first walk from each folder (the graph is small). */
function cycles(edges: Map<string, Map<string, string>>): string[][] {
  const found = new Map<string, string[]>();
  const walk = (start: string, node: string, path: string[]) => {
    for (const next of edges.get(node)?.keys() ?? []) {
      if (next === start) {
        // One spelling per cycle: rotated to start at its smallest folder.
        const i = path.indexOf([...path].sort()[0] as string);
        const canonical = [...path.slice(i), ...path.slice(0, i)];
        found.set(canonical.join(" → "), canonical);
      } else if (!path.includes(next) && next > start) {
        walk(start, next, [...path, next]);
      }
    }
  };
  for (const start of edges.keys()) walk(start, start, [start]);
  return [...found.values()];
}

const describeCycle = (edges: Map<string, Map<string, string>>, cycle: string[]) =>
  cycle.map((from, i) => {
    const to = cycle[(i + 1) % cycle.length] as string;
    return `${from} → ${to} (${edges.get(from)?.get(to)})`;
  });

describe("layering", () => {
  const files = sourceFiles(SRC);

  test("the import reader sees every kind of import, and none in comments", () => {
    const text = [
      `import { a } from "./a.ts";`,
      `import type { B } from "../b/b.ts";`,
      `import "./side.ts";`,
      `export { c } from "./c.ts";`,
      `export * from "./d.ts";`,
      `const e = await import("./e.ts");`,
      `import {\n  f,\n  type G,\n} from "./f.ts";`,
      `// import { x } from "./commented.ts";`,
      `/** @example import { y } from "./doc.ts" */`,
    ].join("\n");
    expect(importsOf(text).sort()).toEqual(["../b/b.ts", "./a.ts", "./c.ts", "./d.ts", "./e.ts", "./f.ts", "./side.ts"]);
  });

  test("the cycle finder finds a cycle, and only one spelling of it", () => {
    const graph = new Map([
      ["a", new Map([["b", "a.ts → ../b/b.ts"]])],
      ["b", new Map([["c", "b.ts → ../c/c.ts"]])],
      ["c", new Map([["a", "c.ts → ../a/a.ts"]])],
      ["d", new Map([["a", "d.ts → ../a/a.ts"]])],
    ]);
    expect(cycles(graph)).toEqual([["a", "b", "c"]]);
  });

  test("no import cycle between the top-level folders of src/", () => {
    const edges = folderGraph(files);
    expect(edges.size).toBeGreaterThan(5); // the graph was really read
    expect(cycles(edges).map((c) => describeCycle(edges, c))).toEqual([]);
  });

  // Each table belongs to the capability whose schema declares it; another capability reads it
  // through the owner's functions (or an SQL condition the owner writes, such as storage/files.ts
  // `storesSql`), never by naming it in its own SQL. src/db (migrations, the PostgreSQL schema)
  // and the wiring in src/*.ts are no capability.
  test("one owner per table: no capability names another's table in its SQL", () => {
    const owners = new Map<string, string>();
    for (const f of files) {
      const folder = folderOf(f);
      if (!folder || !f.endsWith("schema.ts") || folder === "db") continue;
      for (const m of readFileSync(f, "utf8").matchAll(/sqliteTable\(\s*"([a-z_0-9]+)"/g)) owners.set(m[1] as string, folder);
    }
    expect(owners.get("files")).toBe("storage");
    expect(owners.get("directory_entries")).toBe("directory");
    expect(owners.size).toBeGreaterThan(20);
    const offenders = files.flatMap((f) => {
      const folder = folderOf(f);
      if (!folder || folder === "db") return [];
      const text = code(readFileSync(f, "utf8"));
      return [...owners].flatMap(([table, owner]) => {
        if (owner === folder) return [];
        const named = new RegExp(`\\b(?:FROM|JOIN|INTO|UPDATE|EXISTS \\(SELECT 1 FROM)\\s+${table}\\b`, "i");
        return named.test(text) ? [`${relative(SRC, f)} names ${owner}'s table ${table}`] : [];
      });
    });
    expect(offenders).toEqual([]);
  });

  // Who may act and who pays (a signed call's session and voucher, an access key) is the
  // authorities' business: access keys and the encryption routes verify signed calls through
  // src/authorities, and so need nothing of the storage capability.
  test("keys/ and encryption/ import nothing of storage/", () => {
    const edges = folderGraph(files);
    expect(edges.get("keys")?.has("authorities")).toBe(true); // the graph was really read
    const offenders = ["keys", "encryption"].flatMap((folder) => {
      const via = edges.get(folder)?.get("storage");
      return via ? [`${folder}: ${via}`] : [];
    });
    expect(offenders).toEqual([]);
  });

  // Every way a file arrives (the storage API's upload, S3, a pin, a CAR) is one pipeline: only it
  // opens an upload's quota meter and records a file, so no caller can meter, check or record in
  // an order of its own.
  test("only the storage pipeline opens an upload's meter or records a file", () => {
    const path = (f: string) => relative(SRC, f).split(sep).join("/");
    const recorders = files
      .filter((f) => {
        const text = readFileSync(f, "utf8");
        return /\brecordFiles?\b/.test(code(text)) && importsOf(text).some((spec) => spec.startsWith(".") && path(resolve(dirname(f), spec)) === "storage/pending.ts");
      })
      .map(path);
    // Opened alone (beginUpload) or as a first look read with the authority's (uploadLook).
    const meters = files.filter((f) => /\.(beginUpload|uploadLook)\(/.test(code(readFileSync(f, "utf8")))).map(path);
    // The scans really see the pipeline's import and call.
    expect(recorders).toContain("storage/pipeline.ts");
    expect(meters).toContain("storage/pipeline.ts");
    expect([...recorders, ...meters].filter((f) => f !== "storage/pipeline.ts")).toEqual([]);
  });

  // The pipeline and the authorities it takes are below every API: they import no HTTP module and
  // no Node stream, so a walk of an upload from its route down never meets a request again.
  test("the pipeline and the authorities import nothing of http/ or node:stream", () => {
    const below = ["storage/pipeline.ts", ...readdirSync(join(SRC, "authorities")).map((f) => `authorities/${f}`)];
    expect(below).toContain("authorities/sessions.ts"); // the folder was really read
    const offenders = below.flatMap((path) => {
      const file = join(SRC, path);
      return importsOf(readFileSync(file, "utf8"))
        .filter((spec) => spec === "node:stream" || (spec.startsWith(".") && relative(SRC, resolve(dirname(file), spec)).split(sep)[0] === "http"))
        .map((spec) => `${path} → ${spec}`);
    });
    expect(offenders).toEqual([]);
  });

  // The storage routes are the only storage files that see HTTP; everything they call takes and
  // returns plain values (streams, byte ranges, typed results). An HTTP type is one named in a type
  // position (a parameter, a result, a generic argument) or anything from Elysia; `new Response(s)`
  // used only to buffer a stream hands no HTTP message across a boundary.
  const HTTP_TYPES = /(?::|<|\||&|\bextends|\bimplements|\bas)\s*(?:Request|Response|Context)\b|\bElysia\b/;
  const belowRoutes = files.filter((f) => {
    const path = relative(SRC, f).split(sep).join("/");
    return path.startsWith("storage/") && path !== "storage/routes.ts";
  });

  test("no HTTP type below the storage routes", () => {
    expect(belowRoutes).toContain(join(SRC, "storage/service.ts"));
    expect(belowRoutes.some((f) => f.includes(`${sep}dfs${sep}`))).toBe(true);
    expect(belowRoutes.some((f) => f.includes(`${sep}ipfs${sep}`))).toBe(true);
    const offenders = belowRoutes.flatMap((f) => {
      const text = code(readFileSync(f, "utf8"));
      const fromElysia = importsOf(text).some((s) => s === "elysia" || s.startsWith("elysia/") || s.startsWith("@elysiajs/"));
      const named = text.split("\n").flatMap((line, i) => (HTTP_TYPES.test(line) ? [`${relative(SRC, f)}:${i + 1}: ${line.trim()}`] : []));
      return fromElysia ? [`${relative(SRC, f)} imports elysia`, ...named] : named;
    });
    expect(offenders).toEqual([]);
  });

  test("the HTTP-type check sees types in signatures, not words in strings", () => {
    const lines = [
      "async function upload(request: Request, kind: string) {",
      "function f(): Promise<Response> {",
      "const x = y as Response;",
      "import { Elysia } from 'elysia';",
    ];
    expect(lines.filter((l) => HTTP_TYPES.test(l))).toEqual(lines);
    expect(HTTP_TYPES.test("const bytes = await new Response(stream).bytes();")).toBe(false);
    expect(HTTP_TYPES.test('throw storageError.badRequest("the upload was interrupted");')).toBe(false);
  });

  // The wire model is written once (src/http/model.ts). The SDK package must ship no server module,
  // so its one mirror of those shapes is src/sdk/wire.ts, held identical to the server's by
  // test/sdk/wire-types.ts under tsc. A field only those schemas have, spelled in any other SDK
  // file, is a further copy that nothing holds equal.
  test("the SDK declares no wire schema outside wire.ts, and every one there is held equal to the server's", () => {
    const model = readFileSync(join(SRC, "http/model.ts"), "utf8");
    const names = [...model.matchAll(/export type (\w+) = Static</g)].map((m) => m[1] as string);
    expect(names).toEqual(expect.arrayContaining(["FileEntry", "FileList", "QuotaRecord", "StorageErrorBody"]));
    const FIELDS = /\b(HTTPStatusCode|SizeByte|FreeByte|UserDefined|ModTime)\s*\??:/;
    const copies = files
      .filter((f) => relative(SRC, f).startsWith(`sdk${sep}`) && relative(SRC, f) !== join("sdk", "wire.ts"))
      .flatMap((f) =>
        code(readFileSync(f, "utf8"))
          .split("\n")
          .flatMap((line, i) => {
            // (An alias of another type, such as sdk/chain.ts's chain record, copies no fields.)
            const declares = names.some((n) => new RegExp(`\\b(interface|class)\\s+${n}\\b|\\btype\\s+${n}\\s*=\\s*\\{`).test(line));
            return declares || FIELDS.test(line) ? [`${relative(SRC, f)}:${i + 1}: ${line.trim()}`] : [];
          }),
      );
    expect(copies).toEqual([]);
    const mirrored = [...readFileSync(join(SRC, "sdk/wire.ts"), "utf8").matchAll(/export (?:interface|type) (\w+)/g)].map((m) => m[1] as string);
    const checked = readFileSync(join(SRC, "../test/sdk/wire-types.ts"), "utf8");
    expect(mirrored.filter((n) => names.includes(n)).length).toBeGreaterThanOrEqual(4);
    expect(mirrored.filter((n) => !new RegExp(`Equals<(Omit<)?sdk\\.${n}\\b`).test(checked))).toEqual([]);
  });
});
