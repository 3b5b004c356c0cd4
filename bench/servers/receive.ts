/**
 * The plain servers' upload path (bench/storage.ts's baseline and servers/upload-floor.ts): a
 * multipart body parsed as it streams (busboy, as Stowage does), its fields kept, its one file part
 * hashed with SHA-256 and written to one plain file, fsync'd before this resolves. One copy, so the
 * floor differs from the baseline by exactly what it adds.
 *
 * @example
 *   const { size, sha256, fields } = await receiveFile(request, join(dir, id))
 */
import busboy from "busboy";
import { open } from "node:fs/promises";

export interface Received {
  size: number;
  sha256: Uint8Array;
  /** The form's fields (those before the file part: the SDK sends them first). */
  fields: Record<string, string>;
}

export function receiveFile(request: Request, path: string): Promise<Received> {
  const bb = busboy({ headers: { "content-type": request.headers.get("content-type") ?? "" }, limits: { files: 1, fields: 16 } });
  const reader = (request.body as ReadableStream<Uint8Array>).getReader();
  const fields: Record<string, string> = {};
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      void reader.cancel().catch(() => {});
      reject(err);
    };
    let sawFile = false;
    bb.on("field", (name, value) => {
      fields[name] = value;
    });
    bb.on("file", (_name, stream) => {
      sawFile = true;
      void (async () => {
        const fh = await open(path, "w", 0o600);
        try {
          const hasher = new Bun.CryptoHasher("sha256");
          let size = 0;
          for await (const chunk of stream as AsyncIterable<Buffer>) {
            hasher.update(chunk);
            size += chunk.byteLength;
            await fh.write(chunk);
          }
          await fh.sync();
          settled = true;
          resolve({ size, sha256: hasher.digest(), fields });
        } finally {
          await fh.close();
        }
      })().catch(fail);
    });
    bb.on("error", fail);
    bb.on("close", () => {
      if (!sawFile) fail(new Error("no file part"));
    });
    void (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return void bb.end();
        if (!bb.write(value)) await new Promise((r) => bb.once("drain", r));
      }
    })().catch(fail);
  });
}
