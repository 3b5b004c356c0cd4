/**
 * Streams a multipart body: fields first, then one file part whose bytes are handed on as they
 * arrive (never the whole file in memory; busboy under Bun). A file part before the fields it
 * needs, a second file, or too many fields are refused.
 *
 * The file's stream ends only when the whole form has been read, not at the end of its part: a
 * second file part (D14), or a form that breaks off after the file, fails the stream, so the
 * upload never commits a file whose request is then refused.
 *
 * The route reads the form; the storage service takes what this answers (fields, a name and the
 * file's bytes), never the request.
 */
import busboy from "busboy";
import { PassThrough, type Readable } from "node:stream";
import { Failure, failure } from "../failure.ts";
import { StorageError, storageError } from "./errors.ts";

export interface FilePart {
  fields: Record<string, string>;
  filename: string;
  /** The file part's Content-Type, lower case, without parameters ("" when none was sent). */
  type: string;
  /** The file's bytes as they arrive (see `bytesOf`): read once. */
  bytes: AsyncIterable<Uint8Array>;
  /** Stops reading the request (after a refusal, or once done): what is left of the file is drained. */
  stop(): void;
}

/**
 * The file part's bytes. A part that breaks off (the client went away or sent a broken body) is
 * the domain's "interrupted" failure, not whatever a back-end reading it would make of it; a
 * refusal of the form itself (a second file part) is the answer as it is. Ending early (the
 * reader's refusal) destroys the part.
 */
async function* bytesOf(file: Readable): AsyncGenerator<Uint8Array> {
  let ended = false;
  try {
    for await (const chunk of file as AsyncIterable<Buffer>) yield new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    ended = true;
  } catch (err) {
    throw err instanceof StorageError || err instanceof Failure ? err : failure("interrupted", "the upload was interrupted");
  } finally {
    if (!ended) file.destroy();
  }
}

const LIMITS = { files: 1, fields: 16, fieldSize: 8 * 1024, parts: 17, fieldNameSize: 100 };

export function readFilePart(request: Request): Promise<FilePart> {
  const type = request.headers.get("content-type") ?? "";
  if (!/^multipart\/form-data/i.test(type) || !request.body) throw storageError.badRequest("upload needs a multipart/form-data body");
  let bb: busboy.Busboy;
  try {
    bb = busboy({ headers: { "content-type": type }, limits: LIMITS });
  } catch {
    throw storageError.badRequest("malformed multipart Content-Type");
  }
  const reader = request.body.getReader();
  let stopped = false;
  /** The file's bytes as handed on; ended by the form's end, not by the part's. */
  let file: PassThrough | undefined;
  const stop = () => {
    file?.resume();
    stopped = true;
    reader.cancel().catch(() => {});
  };
  const fields: Record<string, string> = {};

  return new Promise<FilePart>((resolve, reject) => {
    let settled = false;
    const fail = (err: unknown) => {
      if (!settled) {
        settled = true;
        stop();
        reject(err);
      } else if (file && !file.writableEnded && !file.destroyed) {
        stop();
        file.destroy(err as Error);
      }
    };
    bb.on("field", (name, value, info) => {
      if (info.valueTruncated || info.nameTruncated) fail(storageError.badRequest(`form field ${name.slice(0, 40)} is too long`));
      else fields[name] = value;
    });
    bb.on("file", (_name, stream, info) => {
      if (settled) {
        stream.resume();
        return;
      }
      if (Object.keys(fields).length === 0) {
        stream.resume();
        fail(storageError.badRequest("the form fields (did, token, requestID, payload, signature, size, sign, and expires or cid when sent) must come before the file part"));
        return;
      }
      settled = true;
      const out = new PassThrough();
      // The upload reads a failure through its iterator, which may not exist yet: the service
      // awaits its database checks first, and the form may fail meanwhile. Unheard, that
      // failure would be an uncaught 'error' event.
      out.on("error", () => {});
      file = out;
      let partDone = false;
      let formDone = false;
      const end = () => {
        if (partDone && formDone && !out.destroyed) out.end();
      };
      stream.on("error", (err) => {
        if (!out.destroyed) out.destroy(err); // the body broke off: the upload maps it
      });
      stream.on("end", () => {
        partDone = true;
        end();
      });
      bb.on("finish", () => {
        formDone = true;
        end();
      });
      stream.pipe(out, { end: false });
      resolve({ fields: { ...fields }, filename: info.filename ?? "", type: (info.mimeType ?? "").split(";")[0]?.trim().toLowerCase() ?? "", bytes: bytesOf(out), stop });
    });
    bb.on("fieldsLimit", () => fail(storageError.badRequest("too many form fields")));
    bb.on("filesLimit", () => fail(storageError.badRequest("one file per upload")));
    bb.on("partsLimit", () => fail(storageError.badRequest("too many form parts")));
    bb.on("error", (err) => fail(storageError.badRequest(`malformed multipart body: ${(err as Error).message}`)));
    bb.on("close", () => {
      if (!settled) fail(storageError.badRequest("the form has no file part"));
    });

    void (async () => {
      try {
        while (!stopped) {
          const { done, value } = await reader.read();
          if (done) {
            bb.end();
            return;
          }
          if (!bb.write(value)) await new Promise((r) => bb.once("drain", r));
        }
      } catch (err) {
        // The client went away, or we stopped reading: the file stream (if any) fails with it.
        bb.destroy(err as Error);
        fail(storageError.badRequest("the upload was interrupted"));
      }
    })();
  });
}
