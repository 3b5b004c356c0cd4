/**
 * Buffers lent to a response body (src/http/lent.ts): a pool hands a given-back buffer out again,
 * and the listener gives a lent chunk back only once its socket no longer reads it. A chunk given
 * back too early is overwritten by the next chunk while the socket still sends it: the client then
 * sees wrong bytes, which the byte-exact comparison below catches (checked: giving back when
 * `write` returns, as the callback-less code would, fails it with megabytes of wrong bytes).
 */
import { afterAll, expect, test } from "bun:test";
import { BufferPool, giveBack, lendToFree } from "../../src/http/lent.ts";
import { listen } from "../../src/http/listen.ts";

const KiB = 1024;
const CHUNK = 256 * KiB;

test("a buffer given back is handed out again; one never lent, or given back twice, changes nothing", () => {
  const pool = new BufferPool(CHUNK, 2);
  const a = pool.take();
  const chunk = pool.lend(a.subarray(0, 100), a);
  giveBack(new Uint8Array(10)); // not lent: ignored
  giveBack(chunk);
  giveBack(chunk); // already back: must not be queued twice (two takers would share it)
  const first = pool.take();
  const second = pool.take();
  expect(first).toBe(a);
  expect(second).not.toBe(a);
  expect(() => pool.lend(new Uint8Array(100), first)).toThrow();
});

test("a buffer lent to be freed is freed when given back, not before; a view of a larger buffer is never freed", () => {
  const whole = new Uint8Array(new ArrayBuffer(CHUNK));
  const chunk = lendToFree(whole.subarray(10, 100), whole);
  expect(whole.buffer.byteLength).toBe(CHUNK); // lent: still readable
  giveBack(chunk);
  expect(whole.buffer.detached).toBe(true); // its memory released without a collection
  giveBack(chunk); // already back: nothing more
  const shared = new Uint8Array(new ArrayBuffer(2 * CHUNK));
  const view = shared.subarray(0, CHUNK);
  giveBack(lendToFree(view.subarray(0, 10), view));
  expect(shared.buffer.detached).toBe(false);
});

/** The byte at `at` of the body: distinct per chunk and per position. */
const byteAt = (at: number) => (Math.floor(at / CHUNK) * 7 + (at % 251)) & 0xff;

/** A body of `chunks` chunks lent from one pool, as a download reads them; counts buffers made. */
function lentBody(chunks: number) {
  const made = { buffers: 0 };
  const pool = new BufferPool(CHUNK, 4);
  const take = pool.take.bind(pool);
  pool.take = () => {
    const b = take();
    if (!seen.has(b)) made.buffers++;
    seen.add(b);
    return b;
  };
  const seen = new WeakSet<Uint8Array>();
  let i = 0;
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(c) {
        if (i === chunks) return c.close();
        // As a download does: the buffer is taken after a wait (its file read), while the listener
        // goes on writing the chunk before — a buffer given back then must be free for real.
        await new Promise((resolve) => setImmediate(resolve));
        const whole = pool.take();
        for (let j = 0; j < CHUNK; j++) whole[j] = byteAt(i * CHUNK + j);
        i++;
        c.enqueue(pool.lend(whole, whole));
      },
    },
    { highWaterMark: 1 },
  );
  return { body, made };
}

/** One pool all one-part answers share, as a ranged GET's bodies do (dfs/read.ts); counts buffers made. */
const onePartPool = new BufferPool(CHUNK, 4);
const onePartMade = new WeakSet<Uint8Array>();
let onePartBuffers = 0;
/** The byte at `at` of answer `seed`: every answer's bytes differ, so one sent from a reused buffer shows. */
const seededByte = (seed: number, at: number) => (seed * 31 + (at % 251)) & 0xff;

function onePartBody(seed: number): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      await new Promise((resolve) => setImmediate(resolve)); // its file read
      const whole = onePartPool.take();
      if (!onePartMade.has(whole)) onePartBuffers++;
      onePartMade.add(whole);
      for (let j = 0; j < CHUNK; j++) whole[j] = seededByte(seed, j);
      c.enqueue(onePartPool.lend(whole, whole));
      c.close();
    },
  });
}

let served: { buffers: number } | undefined;
const server = await listen({
  hostname: "127.0.0.1",
  port: 0,
  maxRequestBodySize: 1000,
  error: () => new Response("failed", { status: 500 }),
  fetch(request) {
    const seed = new URL(request.url).searchParams.get("one");
    if (seed !== null) return new Response(onePartBody(Number(seed)), { headers: { "content-length": String(CHUNK) } });
    const chunks = Number(new URL(request.url).searchParams.get("chunks"));
    const { body, made } = lentBody(chunks);
    served = made;
    return new Response(body, { headers: { "content-length": String(chunks * CHUNK) } });
  },
});
afterAll(() => server.stop(true));

test("a body of lent chunks reaches a slow client byte for byte, its buffers reused", async () => {
  const chunks = 160; // 40 MiB
  const res = await fetch(`http://127.0.0.1:${server.port}/?chunks=${chunks}`);
  expect(res.status).toBe(200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let at = 0;
  let wrong = 0;
  for (let next = await reader.read(); !next.done; next = await reader.read()) {
    for (let j = 0; j < next.value.byteLength; j++) if (next.value[j] !== byteAt(at + j)) wrong++;
    at += next.value.byteLength;
    await Bun.sleep(1); // a slow client: the socket's buffer fills, writes wait for it (backpressure)
  }
  expect(at).toBe(chunks * CHUNK);
  expect(wrong).toBe(0);
  // The point of lending: a few buffers for the whole body, not one per chunk.
  expect((served as { buffers: number }).buffers).toBeLessThan(chunks / 4);
}, 60_000);

test("a body of one lent part (a ranged GET's) goes back to its pool once written: answers share a few buffers, each byte its own", async () => {
  const wrongIn = async (seed: number, slow: boolean) => {
    const res = await fetch(`http://127.0.0.1:${server.port}/?one=${seed}`);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let at = 0;
    let wrong = 0;
    for (let next = await reader.read(); !next.done; next = await reader.read()) {
      for (let j = 0; j < next.value.byteLength; j++) if (next.value[j] !== seededByte(seed, at + j)) wrong++;
      at += next.value.byteLength;
      if (slow) await Bun.sleep(1);
    }
    return at === CHUNK ? wrong : -1;
  };
  // One after another: each answer's buffer is back before the next is read.
  for (let seed = 1; seed <= 20; seed++) expect(await wrongIn(seed, false)).toBe(0);
  expect(onePartBuffers).toBeLessThanOrEqual(2);
  // Slow clients at once, each answer from the one pool: every client gets its own bytes.
  const wrong = await Promise.all(Array.from({ length: 8 }, (_, i) => wrongIn(100 + i, i % 2 === 0)));
  expect(wrong).toEqual(Array(8).fill(0));
}, 60_000);
