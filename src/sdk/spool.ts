/**
 * Where an encrypted upload keeps its ciphertext between sealing it and sending it (D20, D5). The
 * signed hash must precede the bytes, so an upload reads its source twice (hash pass, upload
 * pass); sealing the plaintext twice to get the same bytes doubled the upload's heaviest work
 *. A spool takes the ciphertext once and hands it back as a Blob, read as often as the
 * upload needs (a retry reads it again). On Bun it is a private temporary file (flat memory); in
 * a browser a Blob of the sealed chunks, which the browser's blob store keeps on disk when large
 * and XMLHttpRequest sends with progress. Node has neither without an import of node:fs (the SDK
 * imports no runtime-only module), so there a caller passes its own spool, or none: the upload
 * then seals twice, deterministically (same file key and nonce, the same bytes).
 *
 * @example
 *   const spool = defaultSpool()             // undefined on Node
 *   const sealed = await spool.keep(stream)  // a Blob of the ciphertext
 *   try { await store.upload(kind, sealed) } finally { await spool.drop() }
 */

/** One upload's ciphertext, kept until `drop`. */
export interface Spool {
  /** Reads `sealed` to its end and answers what it holds, as a Blob to read again. */
  keep(sealed: ReadableStream<Uint8Array>): Promise<Blob>;
  /** Frees what `keep` kept (called after the upload, whether it succeeded or not). */
  drop(): Promise<void>;
}

/** Spools into memory, as a Blob of the sealed chunks: for browsers (see above). */
export function blobSpool(): Spool {
  return {
    async keep(sealed) {
      const parts: Uint8Array<ArrayBuffer>[] = [];
      for await (const chunk of sealed) parts.push(chunk as Uint8Array<ArrayBuffer>);
      return new Blob(parts);
    },
    async drop() {},
  };
}

const randomName = () => Array.from(crypto.getRandomValues(new Uint8Array(12)), (b) => b.toString(16).padStart(2, "0")).join("");

/**
 * Spools into a file of `dir` (created 0600, removed by `drop`), through Bun's own API: Bun only.
 * A process killed mid-upload leaves the file (ciphertext only: what the upload would have
 * published anyway); the command line spools into a folder of its own that it removes on signals
 * too (cli/user/encryption.ts, temp.ts).
 */
export function bunFileSpool(dir: string): Spool {
  const path = `${dir.replace(/\/$/, "")}/stowage-seal-${randomName()}.age`;
  return {
    async keep(sealed) {
      await Bun.write(path, sealed, { mode: 0o600, createPath: false });
      return Bun.file(path);
    },
    async drop() {
      await Bun.file(path)
        .delete()
        .catch(() => {});
    },
  };
}

/** The spool of this runtime: a temporary file on Bun (in TMPDIR, TEMP or TMP, as os.tmpdir()
 * reads them, else /tmp), a Blob in a browser, none on Node. */
export function defaultSpool(): Spool | undefined {
  if (typeof Bun !== "undefined") return bunFileSpool(Bun.env.TMPDIR || Bun.env.TEMP || Bun.env.TMP || "/tmp");
  if (typeof (globalThis as { document?: unknown }).document !== "undefined") return blobSpool();
  return undefined;
}
