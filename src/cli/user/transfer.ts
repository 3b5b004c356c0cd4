/**
 * `stowage put` and `stowage get`: files in and out, streamed both ways so that a file of any size
 * takes a few chunks of memory, with progress on stderr.
 */
import { existsSync, readdirSync, statSync, type Dirent, type Stats } from "node:fs";
import { open, rename, unlink } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { ConfigError } from "../../config.ts";
import { StorageApiError, type FileEntry, type StorageClient } from "../../sdk/storage.ts";
import { CliError } from "../chain-access.ts";
import { privateTempDir } from "./temp.ts";
import { BACKENDS, backendOf, explain, expectPositionals, formatBytes, json, loggedIn, userAccount, type Backend, type Invocation, type Io } from "./common.ts";
import { counting, createProgress, type Progress } from "./progress.ts";
import { encryptionWith, ownRecipient, uploadSealed, wantsEncryption } from "./encryption.ts";

const progressWanted = (inv: Invocation, io: Io) => inv.flags.has("--progress") || io.stderrTty;

/** A file to put: where it is on disk, the name to store it under, its size. */
interface Item {
  path: string;
  name: string;
  size: number;
}

/** Every regular file under `dir`, in name order, named `prefix/relative/path` (always `/`). */
function walk(dir: string, prefix: string, io: Io, items: Item[] = []): Item[] {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  } catch (err) {
    throw new CliError(`cannot read ${dir}: ${(err as Error).message}`);
  }
  for (const e of entries) {
    const path = join(dir, e.name);
    const name = `${prefix}/${e.name}`;
    if (e.isDirectory()) walk(path, name, io, items);
    else if (e.isFile()) items.push({ path, name, size: statSync(path).size });
    // Links and devices are not followed: a tree upload takes what the tree holds.
    else io.log(`skipped ${path}: not a regular file or folder`);
  }
  return items;
}

/**
 * The gateway's upload route keeps only the last part of a name (the S3 API keeps whole keys), so
 * two files of the same base name in a tree would replace each other: refused before any upload.
 */
function clashes(items: Item[]) {
  const seen = new Map<string, string>();
  for (const { name } of items) {
    const base = name.split("/").pop() as string;
    const other = seen.get(base);
    if (other !== undefined) throw new CliError(`${other} and ${name} would both be stored as ${base} (the gateway's upload keeps a name's last part, so one would replace the other): put them separately with --name`);
    seen.set(base, name);
  }
}

/** A file's --name: the gateway's upload keeps a name's last part, so a folder in it would be dropped unsaid. */
function flatName(given: string | undefined) {
  if (given?.includes("/")) throw new ConfigError(`--name ${JSON.stringify(given)}: the gateway stores a file under the last part of a name (${JSON.stringify(given.split("/").pop())}); give a name without "/" (the S3 API keeps keys with folders)`);
}

/** stdin into a private temporary file: an upload reads its source twice (hash, then send). */
async function spoolStdin(io: Io): Promise<{ path: string; cleanup: () => Promise<void> }> {
  const tmp = await privateTempDir("stowage-put-");
  const path = join(tmp.dir, "stdin");
  const cleanup = tmp.remove;
  try {
    const fh = await open(path, "wx", 0o600);
    try {
      for await (const chunk of (io.stdin ?? (() => Bun.stdin.stream()))()) await writeAll(fh, chunk);
    } finally {
      await fh.close();
    }
  } catch (err) {
    await cleanup();
    throw new CliError(`cannot read stdin: ${(err as Error).message}`);
  }
  return { path, cleanup };
}

export async function put(inv: Invocation, io: Io): Promise<number> {
  const [file] = expectPositionals(inv, ["FILE"]) as [string];
  const kind = backendOf(inv, "--to");
  const given = inv.flags.get("--name");
  if (given !== undefined && !given.trim()) throw new ConfigError("--name must not be empty");
  if (inv.flags.has("--json") && inv.flags.has("--quiet")) throw new ConfigError("--json and --quiet do not go together");
  if (file === "-" && given === undefined) throw new ConfigError("put - reads stdin, which has no name: add --name NAME");
  if (file === "-") flatName(given);
  let spooled: Awaited<ReturnType<typeof spoolStdin>> | undefined;
  let items: Item[];
  let tree = false;
  if (file === "-") {
    spooled = await spoolStdin(io);
    items = [{ path: spooled.path, name: given as string, size: statSync(spooled.path).size }];
  } else {
    let st: Stats;
    try {
      st = statSync(file);
    } catch (err) {
      throw new CliError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (err as Error).message}`);
    }
    if (st.isDirectory()) {
      tree = true;
      // Named from the folder down, as `cp -r` would place them; --name renames the top folder.
      const top = (given ?? basename(resolve(file))).replace(/\/+$/, "");
      items = walk(file, top, io);
      if (!items.length) throw new CliError(`${file} holds no files to put`);
      clashes(items);
    } else if (st.isFile()) {
      flatName(given);
      items = [{ path: file, name: given ?? basename(file), size: st.size }];
    }
    else throw new CliError(`${file} is not a file or folder`);
  }
  try {
    if (inv.flags.has("--car")) return await putCar(inv, io, kind, items, tree);
    return await putItems(inv, io, kind, items, tree);
  } finally {
    await spooled?.cleanup();
  }
}

/** `put FILE.car --car`: the CAR imported into ipfs, one line (or JSON entry) per root. */
async function putCar(inv: Invocation, io: Io, kind: Backend, items: Item[], tree: boolean): Promise<number> {
  if (tree) throw new ConfigError("--car takes one CAR file, not a folder");
  if (inv.flags.has("--to") && kind !== "ipfs") throw new ConfigError("--car imports into ipfs: a CAR's blocks keep their Cids there (leave out --to, or --to ipfs)");
  if (inv.flags.has("--encrypt")) throw new ConfigError("--car and --encrypt do not go together: a CAR's blocks are stored as their Cids name them");
  const item = items[0] as Item;
  const account = userAccount(inv);
  const show = progressWanted(inv, io);
  const store = await loggedIn(inv, account);
  if (show) io.log(`hashing ${item.name} (${formatBytes(item.size)}), then importing it …`);
  // One root is named as the file, less .car (the gateway does that); several by their Cids.
  const list = await store.importCar(item.path, { name: item.name });
  for (const entry of list.Object) {
    if (!inv.flags.has("--json")) io.out(inv.flags.has("--quiet") ? entry.Cid : `ID ${entry.ID}  Cid ${entry.Cid}  ${formatBytes(entry.Size)}  ipfs  ${entry.Name}`);
  }
  if (inv.flags.has("--json")) io.out(json(list.Object));
  return 0;
}

async function putItems(inv: Invocation, io: Io, kind: Backend, items: Item[], tree: boolean): Promise<number> {
  const encrypt = wantsEncryption(inv);
  const account = userAccount(inv);
  const show = progressWanted(inv, io);
  let current = items[0] as Item;
  let progress: Progress | undefined;
  // The SDK streams the multipart body to fetch; a fetch that counts what the body hands over
  // measures the upload without touching the SDK.
  const countingFetch = Object.assign(
    (input: string | URL | Request, init?: RequestInit) => {
      if (init?.method === "POST" && init.body instanceof ReadableStream) {
        const total = Number(new Headers(init.headers).get("content-length")) || undefined;
        progress = createProgress(`put ${current.name}`, total, { enabled: show, tty: io.stderrTty });
        return fetch(input, { ...init, body: counting(init.body, progress) });
      }
      return fetch(input, init);
    },
    { preconnect: fetch.preconnect },
  );
  const store = await loggedIn(inv, account, show ? { fetch: countingFetch } : {});
  // Published once for the whole run (the SDK's encrypted upload would check the chain per file).
  const recipient = encrypt ? await ownRecipient(await encryptionWith(inv, store, account, show ? { fetch: countingFetch } : {})) : undefined;
  const stored: FileEntry[] = [];
  for (const [i, item] of items.entries()) {
    current = item;
    if (show) io.log(`${encrypt ? "encrypting, then hashing" : "hashing"} ${item.name} (${formatBytes(item.size)}) …`);
    let entry: FileEntry;
    try {
      // Encrypted: sealed once to the account's own age key (D20) into a private temporary file,
      // which is then read twice like any upload (hash, send) instead of being sealed twice.
      entry = recipient ? await uploadSealed(store, recipient, kind, item.path, item.name) : await store.upload(kind, item.path, { name: item.name });
    } catch (err) {
      progress?.abort();
      if (!tree) throw err;
      // The first failure ends the run: what follows would most likely fail alike (quota, key).
      const kept = stored.length ? `; the ${stored.length} put before it stay stored` : "";
      throw new CliError(`put stopped at ${item.path} (file ${i + 1} of ${items.length})${kept}: ${explain(err, inv.gateway).message}`);
    }
    progress?.done();
    progress = undefined;
    stored.push(entry);
    if (!inv.flags.has("--json")) io.out(inv.flags.has("--quiet") ? entry.Cid : `ID ${entry.ID}  Cid ${entry.Cid}  ${formatBytes(entry.Size)}  ${kind}  ${entry.Name}${encrypt ? "  (age-encrypted)" : ""}`);
  }
  // A tree answers a list (even of one file), a file its entry, so scripts know what to parse.
  if (inv.flags.has("--json")) io.out(json(tree ? stored : stored[0]));
  if (tree) io.log(`put ${stored.length} file${stored.length === 1 ? "" : "s"}, ${formatBytes(stored.reduce((n, e) => n + e.Size, 0))}, to ${kind}`);
  return 0;
}

/** `A-B` (inclusive) or `A-` (to the end). */
function parseRange(raw: string | undefined): { start: number; end?: number } | undefined {
  if (raw === undefined) return undefined;
  const m = /^(\d+)-(\d*)$/.exec(raw.trim());
  const start = Number(m?.[1]);
  const end = m?.[2] ? Number(m[2]) : undefined;
  if (!m || !Number.isSafeInteger(start) || (end !== undefined && !Number.isSafeInteger(end))) throw new ConfigError(`--range must be A-B (bytes A to B, both included) or A- (from A to the end), got ${JSON.stringify(raw)}`);
  if (end !== undefined && end < start) throw new ConfigError(`--range ${raw} ends before it starts`);
  return { start, ...(end !== undefined ? { end } : {}) };
}

/** The size of a readable Cid. A refused HEAD carries no body to explain itself, so the refusal
 * is asked again as a GET for no bytes, which fails the same way and says why. When it answers
 * otherwise, the access changed in between (a grant the gateway's indexer has just seen): the
 * HEAD is asked once more, instead of reporting the GET's refusal of a zero-byte voucher. */
export async function sizeOf(store: Pick<StorageClient, "sizeOf" | "download">, kind: Backend, cid: string): Promise<number> {
  try {
    return await store.sizeOf(kind, cid);
  } catch (err) {
    if (!(err instanceof StorageApiError) || err.body.Description) throw err;
    try {
      const res = await store.download(kind, cid, { size: 0 });
      await res.body?.cancel();
    } catch (again) {
      if (again instanceof StorageApiError && again.status === err.status) throw again;
    }
    return store.sizeOf(kind, cid);
  }
}

/** The file name of an attachment (RFC 6266), reduced to a safe base name. */
function attachmentName(res: Response): string | undefined {
  const cd = res.headers.get("content-disposition") ?? "";
  let name: string | undefined;
  const ext = /filename\*=UTF-8''([^;]+)/i.exec(cd)?.[1];
  if (ext) {
    try {
      name = decodeURIComponent(ext);
    } catch {
      name = undefined;
    }
  }
  name ??= /filename="([^"]*)"/i.exec(cd)?.[1];
  const base = name?.split(/[\\/]/).pop()?.trim();
  return base && base !== "." && base !== ".." ? base : undefined;
}

/** One of the user's own files by Cid, dfs first, through every page of the listings. */
export async function findOwn(store: StorageClient, cid: string): Promise<{ file: FileEntry; kind: Backend } | undefined> {
  const PAGE = 1000;
  for (const kind of BACKENDS) {
    for (let after: number | undefined; ; ) {
      const page = (await store.list(kind, { limit: PAGE, ...(after !== undefined ? { after } : {}) })).Object;
      const file = page.find((e) => e.Cid === cid);
      if (file) return { file, kind };
      if (page.length < PAGE) break;
      after = page[page.length - 1]?.ID;
    }
  }
  return undefined;
}

/**
 * Where to read a Cid when `--from` names no back-end: where the user stores it, else the first
 * back-end that lets them read it (a file the directory opens to them). The server answers 403
 * alike for a Cid that exists elsewhere and one that exists nowhere, so a refusal only says which
 * back-ends were tried, with the gateway's words.
 */
export async function locate(inv: Invocation, store: StorageClient, cid: string): Promise<{ kind: Backend; size: number }> {
  const own = await findOwn(store, cid);
  const tried = own ? [own.kind] : [...BACKENDS];
  const refusals: string[] = [];
  for (const kind of tried) {
    try {
      return { kind, size: await sizeOf(store, kind, cid) };
    } catch (err) {
      if (!(err instanceof StorageApiError)) throw err;
      refusals.push(explain(err, inv.gateway).message);
    }
  }
  if (own) throw new CliError(`cannot read ${cid} from ${own.kind}, where you store it: ${refusals[0]}`);
  const why = refusals.every((r) => r === refusals[0]) ? `both: ${refusals[0]}` : tried.map((k, i) => `${k}: ${refusals[i]}`).join("; ");
  throw new CliError(`cannot read ${cid}: you store no file with this Cid, and neither dfs nor ipfs lets you read it (tried ${why}). Is it published, and granted to you or bought (\`stowage buy-read\`)?`);
}

export async function get(inv: Invocation, io: Io): Promise<number> {
  const [cid] = expectPositionals(inv, ["CID"]) as [string];
  const named = inv.flags.has("--from") ? backendOf(inv, "--from") : undefined;
  const range = parseRange(inv.flags.get("--range"));
  const outPath = inv.flags.get("--out");
  const raw = inv.flags.has("--raw");
  const account = userAccount(inv);
  const store = await loggedIn(inv, account);
  const found = named === undefined ? await locate(inv, store, cid) : undefined;
  const kind = named ?? (found as { kind: Backend }).kind;
  if (found && progressWanted(inv, io)) io.log(`reading ${cid} from ${kind}`);

  let res: Response;
  if (range?.end !== undefined) {
    res = await store.download(kind, cid, { range: [range.start, range.end] });
  } else {
    const size = found?.size ?? (await sizeOf(store, kind, cid));
    if (range && range.start >= size) throw new CliError(`--range starts at byte ${range.start}, but the file has ${size} bytes`);
    res = await store.download(kind, cid, range ? { range: [range.start, size - 1] } : { size });
  }
  const declared = res.headers.get("content-length");
  let total = declared === null ? undefined : Number(declared);
  let body = res.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() });
  if (!raw && res.headers.get("x-stowage-encryption") === "age") {
    // D20: decrypted on the fly, with the account's own key or the owner's share for it.
    if (range) {
      await body.cancel();
      throw new CliError("this file is encrypted, and a byte range of it cannot be decrypted alone: drop --range, or add --raw for the ciphertext as stored");
    }
    body = (await (await encryptionWith(inv, store, account)).open(res, cid)).body;
    total = undefined; // the plaintext is shorter than what the gateway declared
  }
  const progress = createProgress(`get ${attachmentName(res) ?? cid}`, total, { enabled: progressWanted(inv, io), tty: io.stderrTty });

  let written: number | "closed";
  try {
    written = outPath !== undefined && outPath !== "-" ? await toFile(body, outPath, res, cid, total, progress) : await toStdout(body, progress);
  } catch (err) {
    progress.abort();
    throw err;
  }
  if (written === "closed") {
    // The reader of our stdout went away (`stowage get … | head`): it has what it wanted.
    progress.abort();
    return 0;
  }
  if (total !== undefined && written !== total) throw new CliError(`the download stopped after ${written} of ${total} bytes`);
  progress.done();
  return 0;
}

async function writeAll(fh: Awaited<ReturnType<typeof open>>, chunk: Uint8Array) {
  let offset = 0;
  while (offset < chunk.byteLength) offset += (await fh.write(chunk, offset)).bytesWritten;
}

/**
 * Into a file: a regular file is written under a temporary name beside it and renamed once every
 * byte came, so a failed download never leaves a half file under the wanted name. A directory
 * receives the file under its stored name; a device or FIFO is written as it is.
 */
async function toFile(body: ReadableStream<Uint8Array>, outPath: string, res: Response, cid: string, total: number | undefined, progress: Progress): Promise<number> {
  let target = outPath;
  if (existsSync(target) && statSync(target).isDirectory()) target = join(target, attachmentName(res) ?? cid);
  const regular = !existsSync(target) || statSync(target).isFile();
  const temp = regular ? join(dirname(target), `.${basename(target)}.${crypto.randomUUID().slice(0, 8)}.part`) : target;
  let fh: Awaited<ReturnType<typeof open>>;
  try {
    fh = await open(temp, "w");
  } catch (err) {
    await body.cancel();
    throw new CliError(`cannot write ${target}: ${(err as Error).message}`);
  }
  let written = 0;
  try {
    for await (const chunk of body) {
      await writeAll(fh, chunk);
      written += chunk.byteLength;
      progress.add(chunk.byteLength);
    }
    await fh.close();
    if (total !== undefined && written !== total) throw new CliError(`the download stopped after ${written} of ${total} bytes; ${target} was not written`);
    if (regular) await rename(temp, target);
    return written;
  } catch (err) {
    await fh.close().catch(() => undefined);
    if (regular) await unlink(temp).catch(() => undefined);
    throw err;
  }
}

/** Into stdout, waiting for it to drain, so a slow reader holds the download back instead of
 * the whole file piling up in memory. */
async function toStdout(body: ReadableStream<Uint8Array>, progress: Progress): Promise<number | "closed"> {
  const out = process.stdout;
  let failure: NodeJS.ErrnoException | undefined;
  const onError = (err: NodeJS.ErrnoException) => {
    failure = err;
  };
  out.on("error", onError);
  let written = 0;
  const settle = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        out.off("drain", done);
        out.off("error", done);
        resolve();
      };
      out.once("drain", done);
      out.once("error", done);
    });
  try {
    for await (const chunk of body) {
      if (failure) break;
      written += chunk.byteLength;
      progress.add(chunk.byteLength);
      if (!out.write(chunk)) await settle();
    }
    if (!failure) await new Promise<void>((resolve) => out.write(new Uint8Array(0), () => resolve()));
  } finally {
    out.off("error", onError);
  }
  if (failure) {
    await body.cancel().catch(() => undefined);
    if (failure.code === "EPIPE") return "closed";
    throw new CliError(`writing to stdout failed: ${failure.message}`);
  }
  return written;
}
