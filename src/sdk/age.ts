/**
 * SDK: client-side encryption in the age v1 format (DESIGN.md D20), X25519 recipients only.
 * A file encrypted here opens with any age tool and the other way round, so a user is never locked
 * into this SDK for their own keys. Both directions stream: memory holds one 64 KiB chunk (and the
 * header), never the file. Built on the same @noble/@scure primitives as the `age-encryption`
 * package, with no Bun or Node API, so it runs in browsers too; the payload's ChaCha20-Poly1305
 * runs on libsodium's WASM where it loads, three times as fast (aead.ts). Not supported (yet): scrypt
 * (passphrase) stanzas, plugins, the ASCII armor.
 *
 * @example
 *   const identity = generateIdentity()            // AGE-SECRET-KEY-1…, keep it secret
 *   const recipient = identityToRecipient(identity) // age1…, share it
 *   const sealed = encryptStream([recipient], file.stream())
 *   const plain = decryptStream([identity], sealed)
 */
import { chacha20poly1305 } from "@noble/ciphers/chacha.js";
import { payloadAead } from "./aead.ts";
import { x25519 } from "@noble/curves/ed25519.js";
import { hkdf } from "@noble/hashes/hkdf.js";
import { hmac } from "@noble/hashes/hmac.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { concatBytes, randomBytes, utf8ToBytes } from "@noble/hashes/utils.js";
import { base64nopad, bech32 } from "@scure/base";

/** Why an age operation failed; a caller can branch on it (a wrong key is not a corrupt file). */
export type AgeErrorCode =
  | "bad_recipient" // not an `age1…` X25519 recipient
  | "bad_identity" // not an `AGE-SECRET-KEY-1…` identity
  | "bad_header" // not an age v1 header, or a malformed one
  | "no_identity" // none of the given identities opens any stanza: the file is for someone else
  | "bad_header_mac" // the header was changed after it was written
  | "bad_chunk" // a payload chunk fails authentication: changed, reordered or cut inside
  | "truncated" // the input ends before the final chunk
  | "trailing_data"; // bytes follow the chunk marked final

export class AgeError extends Error {
  override name = "AgeError";
  constructor(
    readonly code: AgeErrorCode,
    message: string,
  ) {
    super(message);
  }
}

const INTRO = "age-encryption.org/v1";
const X25519_INFO = utf8ToBytes("age-encryption.org/v1/X25519");
const RECIPIENT_HRP = "age";
const IDENTITY_HRP = "age-secret-key-";
const FILE_KEY_SIZE = 16;
const NONCE_SIZE = 16;
const TAG_SIZE = 16;
/** Plaintext bytes per STREAM chunk (the spec fixes it). */
export const CHUNK_SIZE = 64 * 1024;
const CHUNK_CT_SIZE = CHUNK_SIZE + TAG_SIZE;
/** Chunks sealed into one piece of the output stream where the AEAD can (1 MiB of plaintext). */
const BATCH = 16;
const COLUMNS = 64;
/** The header is read into memory; a bound keeps a hostile input from growing it without end
 * (at ≈ 110 bytes a stanza this still allows several hundred recipients). */
const MAX_HEADER = 64 * 1024;

// ---------------------------------------------------------------------------------------------
// Keys

/** X25519's base point, u = 9. */
const BASE_U = new Uint8Array(32);
BASE_U[0] = 9;
/** An X25519 public key by the Montgomery ladder (≈ 2–4 ms). noble's getPublicKey first builds
 * precomputed tables (≈ 85 ms of CPU), which only pay off over many keys, and a command-line run
 * derives three or four. */
const publicKeyOf = (secret: Uint8Array): Uint8Array => x25519.scalarMult(secret, BASE_U);

/** A fresh X25519 identity, as age-keygen writes it: `AGE-SECRET-KEY-1…` (bech32, upper case). */
export function generateIdentity(): string {
  return bech32.encode(IDENTITY_HRP, bech32.toWords(x25519.utils.randomSecretKey()), false).toUpperCase();
}

/** The public `age1…` recipient of an identity: what others encrypt to. */
export function identityToRecipient(identity: string): string {
  return bech32.encode(RECIPIENT_HRP, bech32.toWords(publicKeyOf(parseIdentity(identity))), false);
}

function decodeKey(text: string, hrp: string, code: AgeErrorCode, what: string): Uint8Array {
  let decoded: { prefix: string; words: number[] };
  try {
    // false: no length limit (BIP-173's 90 is for addresses; age keys stay under it anyway).
    decoded = bech32.decode(text.trim() as `${string}1${string}`, false);
  } catch (e) {
    throw new AgeError(code, `not ${what}: ${(e as Error).message}`);
  }
  if (decoded.prefix !== hrp) throw new AgeError(code, `not ${what}: prefix ${decoded.prefix}`);
  const bytes = bech32.fromWords(decoded.words);
  if (bytes.length !== 32) throw new AgeError(code, `not ${what}: ${bytes.length} bytes, not 32`);
  return bytes;
}

/** An identity from its 32 secret bytes (a key kept as hex, such as a gateway's in data/secrets). */
export function identityFromBytes(secret: Uint8Array): string {
  if (secret.length !== 32) throw new AgeError("bad_identity", `not an X25519 secret key: ${secret.length} bytes, not 32`);
  return bech32.encode(IDENTITY_HRP, bech32.toWords(secret), false).toUpperCase();
}

/** An X25519 public key (32 bytes, as a DID's key-agreement attribute holds it) as `age1…`. */
export function recipientFromBytes(key: Uint8Array): string {
  if (key.length !== 32) throw new AgeError("bad_recipient", `not an X25519 public key: ${key.length} bytes, not 32`);
  return bech32.encode(RECIPIENT_HRP, bech32.toWords(key), false);
}

/** The 32 bytes of an `age1…` recipient. */
export function recipientToBytes(recipient: string): Uint8Array {
  return parseRecipient(recipient);
}

function parseIdentity(identity: string): Uint8Array {
  return decodeKey(identity, IDENTITY_HRP, "bad_identity", "an age X25519 identity (AGE-SECRET-KEY-1…)");
}

function parseRecipient(recipient: string): Uint8Array {
  if (recipient.trim() !== recipient.trim().toLowerCase()) throw new AgeError("bad_recipient", "not an age recipient: age1… is lower case");
  return decodeKey(recipient, RECIPIENT_HRP, "bad_recipient", "an age X25519 recipient (age1…)");
}

/** The X25519 stanza's wrapping key; an all-zero shared secret (a low-order share) is refused as
 * the spec requires, or anyone could read the wrapped file key. */
function wrapKey(secret: Uint8Array, peer: Uint8Array, share: Uint8Array, recipient: Uint8Array): Uint8Array | null {
  let shared: Uint8Array;
  try {
    shared = x25519.getSharedSecret(secret, peer);
  } catch {
    return null; // noble refuses low-order points itself
  }
  if (shared.every((b) => b === 0)) return null;
  return hkdf(sha256, shared, concatBytes(share, recipient), X25519_INFO, 32);
}

// ---------------------------------------------------------------------------------------------
// Header

interface Stanza {
  args: string[];
  body: Uint8Array;
}

const ZERO_NONCE = new Uint8Array(12);

function headerMac(fileKey: Uint8Array, headerUpToDashes: Uint8Array): Uint8Array {
  const key = hkdf(sha256, fileKey, new Uint8Array(0), utf8ToBytes("header"), 32);
  return hmac(sha256, key, headerUpToDashes);
}

function payloadKey(fileKey: Uint8Array, nonce: Uint8Array): Uint8Array {
  return hkdf(sha256, fileKey, nonce, utf8ToBytes("payload"), 32);
}

/** The body's base64 in 64-column lines, the last one always shorter (so possibly empty): that is
 * how a reader knows where the body ends. */
function encodeBody(body: Uint8Array): string {
  const b64 = base64nopad.encode(body);
  let out = "";
  for (let i = 0; i <= b64.length; i += COLUMNS) out += `${b64.slice(i, i + COLUMNS)}\n`;
  return out;
}

function encodeHeader(recipients: Uint8Array[], fileKey: Uint8Array): Uint8Array {
  let text = `${INTRO}\n`;
  for (const recipient of recipients) {
    const ephemeral = x25519.utils.randomSecretKey();
    const share = publicKeyOf(ephemeral);
    const key = wrapKey(ephemeral, recipient, share, recipient);
    if (!key) throw new AgeError("bad_recipient", "the recipient is a low-order point");
    const body = chacha20poly1305(key, ZERO_NONCE).encrypt(fileKey);
    text += `-> X25519 ${base64nopad.encode(share)}\n${encodeBody(body)}`;
  }
  text += "---";
  const upToDashes = utf8ToBytes(text);
  return utf8ToBytes(`${text} ${base64nopad.encode(headerMac(fileKey, upToDashes))}\n`);
}

/** Strict base64: no padding, and canonical (re-encodes to the same text), as the spec asks. */
function decodeB64(text: string, what: string): Uint8Array {
  let bytes: Uint8Array;
  try {
    bytes = base64nopad.decode(text);
  } catch {
    throw new AgeError("bad_header", `bad base64 in ${what}`);
  }
  if (base64nopad.encode(bytes) !== text) throw new AgeError("bad_header", `non-canonical base64 in ${what}`);
  return bytes;
}

const ARG = /^[\x21-\x7e]+$/;

/** Reads the header line by line; returns its stanzas, the bytes the MAC covers and the MAC. */
async function readHeader(input: ByteReader): Promise<{ stanzas: Stanza[]; upToDashes: Uint8Array; mac: Uint8Array }> {
  const lines: string[] = [];
  let size = 0;
  const next = async (): Promise<string> => {
    const line = await input.readLine(MAX_HEADER - size);
    if (line === null) throw new AgeError("bad_header", "the input ends inside the age header");
    size += line.length;
    // The header is ASCII; anything else is not age v1 (and would break the MAC's byte count).
    for (const b of line) if (b > 0x7e || (b < 0x20 && b !== 0x0a)) throw new AgeError("bad_header", "a non-ASCII byte in the age header");
    const text = new TextDecoder().decode(line.subarray(0, line.length - 1));
    lines.push(text);
    return text;
  };
  if ((await next()) !== INTRO) throw new AgeError("bad_header", `not an age v1 file (the first line is not ${INTRO})`);
  const stanzas: Stanza[] = [];
  for (;;) {
    const line = await next();
    if (line.startsWith("---")) {
      if (!line.startsWith("--- ")) throw new AgeError("bad_header", "malformed MAC line");
      const mac = decodeB64(line.slice(4), "the header MAC");
      if (mac.length !== 32) throw new AgeError("bad_header", "the header MAC is not 32 bytes");
      const upToDashes = utf8ToBytes(`${lines.slice(0, -1).join("\n")}\n---`);
      return { stanzas, upToDashes, mac };
    }
    if (!line.startsWith("-> ")) throw new AgeError("bad_header", "expected a stanza (-> …) or the MAC line (--- …)");
    const args = line.slice(3).split(" ");
    if (args.some((a) => !ARG.test(a))) throw new AgeError("bad_header", "malformed stanza arguments");
    const parts: Uint8Array[] = [];
    for (;;) {
      const bodyLine = await next();
      if (bodyLine.length > COLUMNS) throw new AgeError("bad_header", "a stanza body line is longer than 64 columns");
      parts.push(decodeB64(bodyLine, "a stanza body"));
      if (bodyLine.length < COLUMNS) break;
    }
    stanzas.push({ args, body: concatBytes(...parts) });
  }
}

function unwrapFileKey(stanzas: Stanza[], identities: Uint8Array[]): Uint8Array {
  for (const stanza of stanzas) {
    if (stanza.args[0] !== "X25519") continue; // another recipient type: not ours to open
    if (stanza.args.length !== 2 || stanza.body.length !== FILE_KEY_SIZE + TAG_SIZE) throw new AgeError("bad_header", "malformed X25519 stanza");
    const share = decodeB64(stanza.args[1] as string, "an X25519 share");
    if (share.length !== 32) throw new AgeError("bad_header", "malformed X25519 share");
    for (const secret of identities) {
      const key = wrapKey(secret, share, share, publicKeyOf(secret));
      if (!key) throw new AgeError("bad_header", "an X25519 stanza with a low-order share");
      try {
        return chacha20poly1305(key, ZERO_NONCE).decrypt(stanza.body);
      } catch {
        // not wrapped for this identity: try the next
      }
    }
  }
  throw new AgeError("no_identity", "none of the given identities can open this file (it was encrypted for other recipients)");
}

// ---------------------------------------------------------------------------------------------
// Streaming helpers

/** A pull-based byte buffer over a stream: keeps only what the caller has not taken yet. */
class ByteReader {
  private chunks: Uint8Array[] = [];
  private size = 0;
  private done = false;
  private readonly reader;
  constructor(input: ReadableStream<Uint8Array>) {
    this.reader = input.getReader();
  }

  get length(): number {
    return this.size;
  }

  /** Reads until at least `n` bytes are buffered or the input ends; false if it ended short. */
  async fill(n: number): Promise<boolean> {
    while (this.size < n && !this.done) {
      const r = await this.reader.read();
      if (r.done) this.done = true;
      else if (r.value.length > 0) {
        this.chunks.push(r.value);
        this.size += r.value.length;
      }
    }
    return this.size >= n;
  }

  /** The next `n` bytes; a view of the buffered chunk when one holds them all (no copy), so the
   * caller must not write into it. Otherwise they are copied into `scratch` when given (at least
   * `n` long; the caller is done with the view before its next take), else into a new array. */
  take(n: number, scratch?: Uint8Array): Uint8Array {
    const first = this.chunks[0];
    if (first && first.length >= n) {
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      this.size -= n;
      return first.subarray(0, n);
    }
    const out = scratch ? scratch.subarray(0, n) : new Uint8Array(n);
    let at = 0;
    while (at < n) {
      const head = this.chunks[0] as Uint8Array;
      const part = Math.min(head.length, n - at);
      out.set(head.subarray(0, part), at);
      at += part;
      if (part === head.length) this.chunks.shift();
      else this.chunks[0] = head.subarray(part);
    }
    this.size -= n;
    return out;
  }

  /** The next piece as it came, whole (what is buffered first); null at the end of input. */
  async next(): Promise<Uint8Array | null> {
    const first = this.chunks.shift();
    if (first) {
      this.size -= first.length;
      return first;
    }
    while (!this.done) {
      const r = await this.reader.read();
      if (r.done) this.done = true;
      else if (r.value.length > 0) return r.value;
    }
    return null;
  }

  /** One line with its "\n"; null at the end of input, an error past `max` bytes. */
  async readLine(max: number): Promise<Uint8Array | null> {
    let scanned = 0;
    for (;;) {
      let at = 0;
      for (const c of this.chunks) {
        if (at + c.length > scanned) {
          const i = c.indexOf(0x0a, Math.max(0, scanned - at));
          if (i >= 0) {
            if (at + i + 1 > max) break;
            return this.take(at + i + 1);
          }
        }
        at += c.length;
      }
      scanned = this.size;
      if (scanned >= max) throw new AgeError("bad_header", `the age header is longer than ${MAX_HEADER} bytes`);
      if (!(await this.fill(this.size + 1))) return null;
    }
  }

  cancel(reason: unknown): Promise<void> {
    return this.reader.cancel(reason);
  }
}

/** A ReadableStream driven by an async generator: it runs only when the consumer pulls, so at most
 * one chunk is in flight (backpressure all the way to the source). */
function fromGenerator(gen: AsyncGenerator<Uint8Array, void>, input: ByteReader): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let r: IteratorResult<Uint8Array, void>;
        try {
          r = await gen.next();
        } catch (e) {
          // Release the source too: nothing more will be read from it.
          await input.cancel(e).catch(() => {});
          throw e;
        }
        if (r.done) controller.close();
        else controller.enqueue(r.value);
      },
      async cancel(reason) {
        await gen.return();
        await input.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/** STREAM's nonce: an 11-byte big-endian chunk counter, then 1 on the final chunk and 0 before.
 * Written into `nonce` when given (one per stream: the AEAD reads it before the next chunk). */
function chunkNonce(counter: number, last: boolean, nonce = new Uint8Array(12)): Uint8Array {
  // Safe integers reach 2^53 chunks (2^69 bytes): bytes 0–2 of the counter stay zero.
  const high = Math.floor(counter / 2 ** 32);
  const low = counter >>> 0;
  nonce[3] = high >>> 24;
  nonce[4] = (high >>> 16) & 255;
  nonce[5] = (high >>> 8) & 255;
  nonce[6] = high & 255;
  nonce[7] = low >>> 24;
  nonce[8] = (low >>> 16) & 255;
  nonce[9] = (low >>> 8) & 255;
  nonce[10] = low & 255;
  nonce[11] = last ? 1 : 0;
  return nonce;
}

/** One piece of the input while the payload is opened in it: how far its bytes are read as
 * ciphertext, and how much plaintext has been gathered at its front. */
interface Piece {
  bytes: Uint8Array;
  read: number;
  plain: number;
}

/**
 * The payload's chunks opened where they arrived. Each sealed chunk is authenticated
 * and decrypted in the input's own pieces, its plaintext moved to the front of its piece, and a
 * piece goes out (its plaintext, a view) once every chunk it holds is open; a chunk that
 * straddles pieces is gathered into one reused buffer, opened there and its plaintext written
 * back into them. So no output buffer is allocated and the fetched bytes are the plaintext's
 * (1 MiB output buffers of fresh memory cost ≈ 0.2–0.3 ms/MiB of CPU more, a quarter of the
 * native cipher's own cost then). Output pieces are the input's, less the tags.
 */
class PayloadPieces {
  private readonly pieces: Piece[] = [];
  /** Bytes of the pieces not yet taken by a chunk. */
  private unread = 0;
  private readonly scratch = new Uint8Array(CHUNK_CT_SIZE);

  /** `copy`: open a copy of each piece, leaving the input's bytes as they were. */
  constructor(
    private readonly input: ByteReader,
    private readonly copy: boolean,
  ) {}

  get length(): number {
    return this.unread;
  }

  /** Reads pieces until `n` bytes are unread or the input ends; false if it ended short. */
  async fill(n: number): Promise<boolean> {
    while (this.unread < n) {
      const next = await this.input.next();
      if (!next) return false;
      this.pieces.push({ bytes: this.copy ? next.slice() : next, read: 0, plain: 0 });
      this.unread += next.length;
    }
    return true;
  }

  /** The next `n` unread bytes as one view, to open in place: within their piece when it holds
   * them all, else gathered into the scratch buffer. */
  view(n: number): Uint8Array {
    const head = this.pieces[0] as Piece;
    if (head.bytes.length - head.read >= n) return head.bytes.subarray(head.read, head.read + n);
    for (let i = 0, at = 0; at < n; i++) {
      const p = this.pieces[i] as Piece;
      const part = Math.min(p.bytes.length - p.read, n - at);
      this.scratch.set(p.bytes.subarray(p.read, p.read + part), at);
      at += part;
    }
    return this.scratch.subarray(0, n);
  }

  /** Takes the `sealed.length` bytes `view` gave, whose first `plain` bytes are now plaintext:
   * they join the plaintext at the front of their pieces. */
  take(sealed: Uint8Array, plain: number): void {
    const gathered = sealed.buffer === this.scratch.buffer;
    let left = sealed.length;
    let at = 0;
    for (let i = 0; left > 0; i++) {
      const p = this.pieces[i] as Piece;
      const part = Math.min(p.bytes.length - p.read, left);
      const keep = Math.max(0, Math.min(part, plain - at));
      if (keep > 0) {
        if (gathered) p.bytes.set(sealed.subarray(at, at + keep), p.plain);
        else if (p.plain !== p.read) p.bytes.copyWithin(p.plain, p.read, p.read + keep);
        p.plain += keep;
      }
      p.read += part;
      left -= part;
      at += part;
    }
    this.unread -= sealed.length;
  }

  /** The plaintext of the pieces read to their end, in order; `all`: of every piece so far too
   * (before an error, what was authentic goes out). */
  done(all = false): Uint8Array[] {
    const out: Uint8Array[] = [];
    while (this.pieces.length > 0) {
      const p = this.pieces[0] as Piece;
      if (!all && p.read < p.bytes.length) break;
      this.pieces.shift();
      if (p.plain > 0) out.push(p.bytes.subarray(0, p.plain));
    }
    return out;
  }
}

// ---------------------------------------------------------------------------------------------
// Encrypt / decrypt

/**
 * An encryption fixed in advance: file key, payload nonce and header (ephemeral shares included)
 * are drawn once, so `encrypt` turns the same plaintext into the same ciphertext every time it is
 * called. That is what an upload needs: its SHA-256 is signed before the bytes are sent (D5), so
 * the hash pass and the upload pass must see identical bytes. Use one per file, never for two
 * different plaintexts.
 */
export interface PreparedEncryption {
  /** The age header, MAC line included (ASCII). */
  header: Uint8Array;
  /** The ciphertext's size for `plainSize` bytes of input. */
  sealedSize(plainSize: number): number;
  encrypt(input: ReadableStream<Uint8Array>): ReadableStream<Uint8Array>;
}

/** Prepares an encryption to every recipient (`age1…`); recipients are checked now. */
export function prepareEncryption(recipients: string[]): PreparedEncryption {
  if (recipients.length === 0) throw new AgeError("bad_recipient", "at least one recipient is needed");
  const keys = recipients.map(parseRecipient);
  const fileKey = randomBytes(FILE_KEY_SIZE);
  const nonce = randomBytes(NONCE_SIZE);
  const header = encodeHeader(keys, fileKey);
  const key = payloadKey(fileKey, nonce);
  return {
    header,
    sealedSize: (plainSize) => header.length + NONCE_SIZE + plainSize + TAG_SIZE * Math.max(1, Math.ceil(plainSize / CHUNK_SIZE)),
    encrypt(input) {
      const reader = new ByteReader(input);
      async function* run(): AsyncGenerator<Uint8Array, void> {
        const aead = await payloadAead();
        yield concatBytes(header, nonce);
        // Where the AEAD seals in place, BATCH chunks fill one buffer per yield: fewer, larger
        // pieces for the stream machinery, whose cost per piece is then no longer the sealing's match.
        let batch = aead.sealInto ? new Uint8Array(BATCH * CHUNK_CT_SIZE) : undefined;
        // A chunk spread over several input pieces is gathered here: sealed at once, so reusable.
        const scratch = new Uint8Array(CHUNK_SIZE);
        let used = 0;
        // A full chunk is final only when nothing follows it, so look one byte past it before sealing.
        for (let counter = 0; ; counter++) {
          const more = await reader.fill(CHUNK_SIZE + 1);
          const plain = reader.take(Math.min(reader.length, CHUNK_SIZE), batch && scratch);
          if (!batch || !aead.sealInto) {
            yield aead.seal(key, chunkNonce(counter, !more), plain);
            if (!more) return;
            continue;
          }
          aead.sealInto(key, chunkNonce(counter, !more), plain, batch.subarray(used, used + plain.length + TAG_SIZE));
          used += plain.length + TAG_SIZE;
          if (!more || used + CHUNK_CT_SIZE > batch.length) {
            yield batch.subarray(0, used);
            if (!more) return;
            batch = new Uint8Array(BATCH * CHUNK_CT_SIZE);
            used = 0;
          }
        }
      }
      return fromGenerator(run(), reader);
    },
  };
}

/** Encrypts `input` to every recipient (`age1…`); the output is an age v1 file. Recipients are
 * checked before anything is read. */
export function encryptStream(recipients: string[], input: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  return prepareEncryption(recipients).encrypt(input);
}

/**
 * The file key of an age file, from its header (read from `input`, which may hold more), opened
 * with the first of `identities` that can and checked against the header's MAC. With it the
 * owner writes a share: a new header for another recipient, over the same payload.
 */
export async function readFileKey(identities: string[], input: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const secrets = identities.map(parseIdentity);
  const reader = new ByteReader(input);
  try {
    const header = await readHeader(reader);
    const fileKey = unwrapFileKey(header.stanzas, secrets);
    if (!equalBytes(headerMac(fileKey, header.upToDashes), header.mac)) throw new AgeError("bad_header_mac", "the age header's MAC does not match: the header was altered");
    return fileKey;
  } finally {
    await reader.cancel(undefined).catch(() => {});
  }
}

/** The first bytes of an age file that `fileKeyOpens` reads at most: the longest header, the
 * payload nonce, the first payload chunk, and one byte that tells whether more chunks follow. */
export const FILE_KEY_CHECK_BYTES = MAX_HEADER + NONCE_SIZE + CHUNK_CT_SIZE + 1;

/**
 * Whether `fileKey` is the key of the age file `input` begins with (its first
 * FILE_KEY_CHECK_BYTES bytes are enough): `true` when its header's MAC checks out under it and
 * the payload's first chunk opens under the payload key it derives; else what failed. The header
 * alone is not enough: its MAC covers the header, and a header made for one key can be put before
 * a payload sealed under another. How a gateway verifies an escrowed key without holding the
 * file's recipient key.
 */
export async function fileKeyOpens(fileKey: Uint8Array, input: ReadableStream<Uint8Array>): Promise<true | "header" | "payload"> {
  const reader = new ByteReader(input);
  try {
    let header: Awaited<ReturnType<typeof readHeader>>;
    try {
      header = await readHeader(reader);
    } catch (err) {
      if (err instanceof AgeError) return "header";
      throw err;
    }
    if (!equalBytes(headerMac(fileKey, header.upToDashes), header.mac)) return "header";
    if (!(await reader.fill(NONCE_SIZE))) return "payload";
    const key = payloadKey(fileKey, reader.take(NONCE_SIZE));
    // One byte past a full chunk says whether it must be the final one (as decryption reads it).
    const more = await reader.fill(CHUNK_CT_SIZE + 1);
    const size = Math.min(reader.length, CHUNK_CT_SIZE);
    if (size < TAG_SIZE) return "payload";
    const sealed = reader.take(size).slice(); // a copy: the input's bytes are not ours to change
    const opened = (await payloadAead()).open(key, chunkNonce(0, !more), sealed);
    return opened ? true : "payload";
  } finally {
    await reader.cancel(undefined).catch(() => {});
  }
}

/** A header wrapping `fileKey` to `recipients`: with the payload of the file `fileKey` opens, an
 * age file those recipients decrypt with any age tool (D20 sharing). */
export function headerFor(fileKey: Uint8Array, recipients: string[]): Uint8Array {
  if (fileKey.length !== FILE_KEY_SIZE) throw new AgeError("bad_header", "a file key is 16 bytes");
  if (recipients.length === 0) throw new AgeError("bad_recipient", "at least one recipient is needed");
  return encodeHeader(recipients.map(parseRecipient), fileKey);
}

export interface DecryptOptions {
  /** Decrypt in the input's own chunks, which the output's chunks are views of: no copy of the
   * input, no buffer for the output. Only for a stream whose chunks nobody else reads
   * or keeps, such as a fetch body; without it each chunk is copied first. */
  inPlace?: boolean;
}

/** Decrypts an age v1 file with the first of `identities` (`AGE-SECRET-KEY-1…`) that opens it.
 * Plaintext comes out piece by piece as the input's pieces come in (less the tags), each only
 * after every chunk in it has been authenticated; a stream that
 * errors (AgeError) may already have handed out earlier, authentic chunks, so a consumer should
 * treat the output as incomplete until the stream closes. */
export function decryptStream(identities: string[], input: ReadableStream<Uint8Array>, o: DecryptOptions = {}): ReadableStream<Uint8Array> {
  if (identities.length === 0) throw new AgeError("bad_identity", "at least one identity is needed");
  const secrets = identities.map(parseIdentity);
  const reader = new ByteReader(input);
  return fromGenerator(decryptPayload(secrets, () => readHeader(reader), reader, o.inPlace === true), reader);
}

/**
 * Decrypts the payload of the age file `input` under another header: a share (D20), which
 * wraps the same file key to one of `identities`. The file's own header is read and skipped.
 * The same as giving `age -d` the share followed by the file's payload.
 */
export function decryptWithHeader(identities: string[], header: Uint8Array, input: ReadableStream<Uint8Array>, o: DecryptOptions = {}): ReadableStream<Uint8Array> {
  if (identities.length === 0) throw new AgeError("bad_identity", "at least one identity is needed");
  const secrets = identities.map(parseIdentity);
  const reader = new ByteReader(input);
  const readShare = async () => {
    // (DOM's Blob wants ArrayBuffer-backed bytes; it copies whatever it is given.)
    const share = new ByteReader(new Blob([header as Uint8Array<ArrayBuffer>]).stream());
    const parsed = await readHeader(share);
    if (await share.fill(1)) throw new AgeError("bad_header", "bytes follow the shared header");
    await readHeader(reader); // the file's own: skipped
    return parsed;
  };
  return fromGenerator(decryptPayload(secrets, readShare, reader, o.inPlace === true), reader);
}

async function* decryptPayload(secrets: Uint8Array[], readFirst: () => ReturnType<typeof readHeader>, reader: ByteReader, inPlace: boolean): AsyncGenerator<Uint8Array, void> {
  const header = await readFirst();
  const fileKey = unwrapFileKey(header.stanzas, secrets);
  const mac = headerMac(fileKey, header.upToDashes);
  if (!equalBytes(mac, header.mac)) throw new AgeError("bad_header_mac", "the age header's MAC does not match: the header was altered");
  // The nonce belongs to the header as age reads it: its absence is a header failure (age's testkit).
  if (!(await reader.fill(NONCE_SIZE))) throw new AgeError("bad_header", "the input ends before the payload nonce");
  const key = payloadKey(fileKey, reader.take(NONCE_SIZE));
  const aead = await payloadAead();
  const nonce = new Uint8Array(12);
  // An AEAD without an in-place opening (one a caller gave) opens a copy, written back.
  const openInPlace =
    aead.openInPlace?.bind(aead) ??
    ((k: Uint8Array, n: Uint8Array, sealed: Uint8Array) => {
      const plain = aead.open(k, n, sealed);
      if (plain) sealed.set(plain);
      return plain !== null;
    });
  const pieces = new PayloadPieces(reader, !inPlace);
  for (let counter = 0; ; counter++) {
    // One byte past a full chunk says whether it must be the final one.
    const more = await pieces.fill(CHUNK_CT_SIZE + 1);
    const size = Math.min(pieces.length, CHUNK_CT_SIZE);
    const sealed = size > 0 ? pieces.view(size) : new Uint8Array(0);
    const open = (last: boolean) => sealed.length >= TAG_SIZE && openInPlace(key, chunkNonce(counter, last, nonce), sealed);
    // An authentic chunk is handed out even when what follows it is wrong (a final chunk with
    // data after it, a full one where the input ends): age's reader releases it before its error
    // and the testkit checks the released bytes, so a consumer sees the same prefix with any tool.
    let authentic = false;
    let failure: AgeError;
    if (more) {
      if (open(false)) {
        pieces.take(sealed, sealed.length - TAG_SIZE);
        yield* pieces.done();
        continue;
      }
      authentic = open(true);
      failure = authentic
        ? new AgeError("trailing_data", `chunk ${counter} is marked final but more data follows it`)
        : new AgeError("bad_chunk", `payload chunk ${counter} fails authentication: the file was altered`);
    } else if (sealed.length < TAG_SIZE) {
      failure = new AgeError("truncated", "the input ends inside a payload chunk");
    } else {
      const final = open(true);
      // Only an empty file has an empty final chunk; age refuses one after full chunks.
      if (final && !(sealed.length === TAG_SIZE && counter > 0)) {
        pieces.take(sealed, sealed.length - TAG_SIZE);
        yield* pieces.done(true);
        return;
      }
      const cut = !final && open(false);
      failure = final
        ? new AgeError("bad_chunk", "an empty final chunk after full ones")
        : cut
          ? new AgeError("truncated", "the input ends before the final chunk: the file was cut")
          : new AgeError("bad_chunk", `payload chunk ${counter} fails authentication: the file was altered or cut`);
      // A full chunk is what age releases (it reads 64 KiB, opens it as not final, and finds the
      // end only at the next read); a short one that opens as not final is never valid, so not released.
      authentic = cut && sealed.length === CHUNK_CT_SIZE;
    }
    if (authentic) pieces.take(sealed, sealed.length - TAG_SIZE);
    yield* pieces.done(true);
    throw failure;
  }
}

/** Constant time in the length: a MAC comparison must not say where it first differs. */
function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] as number) ^ (b[i] as number);
  return diff === 0;
}
