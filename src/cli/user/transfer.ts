/**
 * `stowage put` and `stowage get`: files in and out, streamed both ways so that a file of any size
 * takes a few chunks of memory, with progress on stderr.
 */
import { existsSync, statSync } from "node:fs";
import { open, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { ConfigError } from "../../config.ts";
import { StorageApiError, type FileEntry, type StorageClient } from "../../sdk/storage.ts";
import { CliError } from "../chain-access.ts";
import { backendOf, expectPositionals, formatBytes, json, loggedIn, userAccount, type Backend, type Invocation, type Io } from "./common.ts";
import { counting, createProgress, type Progress } from "./progress.ts";
import { encryptionWith, wantsEncryption } from "./encryption.ts";

const progressWanted = (inv: Invocation, io: Io) => inv.flags.has("--progress") || io.stderrTty;

export async function put(inv: Invocation, io: Io): Promise<number> {
  const [file] = expectPositionals(inv, ["FILE"]) as [string];
  const kind = backendOf(inv, "--to");
  const name = inv.flags.get("--name") ?? basename(file);
  if (!name.trim()) throw new ConfigError("--name must not be empty");
  if (inv.flags.has("--json") && inv.flags.has("--quiet")) throw new ConfigError("--json and --quiet do not go together");
  let size: number;
  try {
    const st = statSync(file);
    if (!st.isFile()) throw new CliError(`${file} is not a file`);
    size = st.size;
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw new CliError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : (err as Error).message}`);
  }
  const encrypt = wantsEncryption(inv);
  const account = userAccount(inv);

  const show = progressWanted(inv, io);
  let progress: Progress | undefined;
  // The SDK streams the multipart body to fetch; a fetch that counts what the body hands over
  // measures the upload without touching the SDK.
  const countingFetch = Object.assign(
    (input: string | URL | Request, init?: RequestInit) => {
      if (init?.method === "POST" && init.body instanceof ReadableStream) {
        const total = Number(new Headers(init.headers).get("content-length")) || undefined;
        progress = createProgress(`put ${name}`, total, { enabled: show, tty: io.stderrTty });
        return fetch(input, { ...init, body: counting(init.body, progress) });
      }
      return fetch(input, init);
    },
    { preconnect: fetch.preconnect },
  );
  const store = await loggedIn(inv, account, show ? { fetch: countingFetch } : {});
  if (show) io.log(`${encrypt ? "encrypting and hashing" : "hashing"} ${name} (${formatBytes(size)}) …`);
  let entry: FileEntry;
  try {
    // Encrypted: sealed to the account's own age key on the way out (D20), read twice like any upload.
    entry = encrypt ? await (await encryptionWith(inv, store, account, show ? { fetch: countingFetch } : {})).upload(kind, file, { name }) : await store.upload(kind, file, { name });
  } catch (err) {
    progress?.abort();
    throw err;
  }
  progress?.done();
  io.out(inv.flags.has("--json") ? json(entry) : inv.flags.has("--quiet") ? entry.Cid : `ID ${entry.ID}  Cid ${entry.Cid}  ${formatBytes(entry.Size)}  ${kind}  ${entry.Name}${encrypt ? "  (age-encrypted)" : ""}`);
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
 * is asked again as a GET for no bytes, which fails the same way and says why. */
async function sizeOf(store: StorageClient, kind: Backend, cid: string): Promise<number> {
  try {
    return await store.sizeOf(kind, cid);
  } catch (err) {
    if (!(err instanceof StorageApiError) || err.body.Description) throw err;
    const res = await store.download(kind, cid, { size: 0 });
    await res.body?.cancel();
    throw err;
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

export async function get(inv: Invocation, io: Io): Promise<number> {
  const [cid] = expectPositionals(inv, ["CID"]) as [string];
  const kind = backendOf(inv, "--from");
  const range = parseRange(inv.flags.get("--range"));
  const outPath = inv.flags.get("--out");
  const raw = inv.flags.has("--raw");
  const account = userAccount(inv);
  const store = await loggedIn(inv, account);

  let res: Response;
  if (range?.end !== undefined) {
    res = await store.download(kind, cid, { range: [range.start, range.end] });
  } else {
    const size = await sizeOf(store, kind, cid);
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
