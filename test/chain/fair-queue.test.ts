// The public RPC's scheduler: a few slots shared by all clients in turn, every piece of work
// answered by its deadline, and a slot held until the work itself ends.
import { describe, expect, test } from "bun:test";
import { FairQueue } from "../../src/chain/fair-queue.ts";
import { until } from "../support/until.ts";

/** Work that ends when the test says so. */
function gate<T>(value: T) {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  let signal: AbortSignal | undefined;
  const started = { value: false };
  return {
    work: async (s: AbortSignal) => {
      started.value = true;
      signal = s;
      await opened;
      return value;
    },
    open: () => open(),
    started,
    aborted: () => signal?.aborted ?? false,
  };
}

const later = (ms: number) => Date.now() + ms;

describe("FairQueue", () => {
  test("waiting work is taken client by client in turn, not in arrival order", async () => {
    const queue = new FairQueue({ slots: 1, maxWaiting: 100, perClient: 100 });
    const order: string[] = [];
    const first = gate("first");
    const running = queue.submit("a", later(5000), first.work);
    const all = [running];
    // a queues three more, then b and c one each: b and c must not wait behind all of a's.
    for (const [client, name] of [["a", "a1"], ["a", "a2"], ["a", "a3"], ["b", "b1"], ["c", "c1"]] as const) {
      all.push(queue.submit(client, later(5000), async () => (order.push(name), name)));
    }
    first.open();
    await Promise.all(all);
    expect(order).toEqual(["a1", "b1", "c1", "a2", "a3"]);
  });

  test("work past its deadline is answered at once: waiting work never starts, running work is aborted", async () => {
    const queue = new FairQueue({ slots: 1, maxWaiting: 100, perClient: 100 });
    const running = gate("late");
    const waiting = gate("never");
    const started = Date.now();
    const [a, b] = await Promise.all([queue.submit("a", later(150), running.work), queue.submit("b", later(150), waiting.work)]);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(a).toEqual({ timedOut: true });
    expect(b).toEqual({ timedOut: true });
    expect(running.aborted()).toBe(true);
    expect(waiting.started.value).toBe(false);
    running.open();
    waiting.open();
  });

  test("a slot stays taken until work that ignores its abort ends; then the next starts", async () => {
    const queue = new FairQueue({ slots: 1, maxWaiting: 100, perClient: 100 });
    const stubborn = gate("done anyway");
    expect(await queue.submit("a", later(50), stubborn.work)).toEqual({ timedOut: true });
    const next = gate("next");
    const answer = queue.submit("b", later(5000), next.work);
    await Bun.sleep(50);
    expect(next.started.value).toBe(false);
    expect(queue.load).toEqual({ running: 1, waiting: 1 });
    stubborn.open();
    await until("the next work to start", () => next.started.value, Boolean, 1000, 1);
    next.open();
    expect(await answer).toEqual({ done: "next" });
  });

  test("past maxWaiting, more work is refused as full; failures reach the caller", async () => {
    const queue = new FairQueue({ slots: 1, maxWaiting: 1, perClient: 1 });
    const busy = gate(1);
    const running = queue.submit("a", later(5000), busy.work);
    const waiting = queue.submit("b", later(5000), async () => 2);
    expect(await queue.submit("c", later(5000), async () => 3)).toEqual({ full: true });
    busy.open();
    expect(await running).toEqual({ done: 1 });
    expect(await waiting).toEqual({ done: 2 });
    await expect(queue.submit("d", later(5000), async () => Promise.reject(new Error("chain gone")))).rejects.toThrow("chain gone");
    expect(queue.load).toEqual({ running: 0, waiting: 0 });
  });

  test("one client may queue perClient pieces of work at most; others still get in", async () => {
    const queue = new FairQueue({ slots: 1, maxWaiting: 100, perClient: 2 });
    const busy = gate("running");
    const running = queue.submit("a", later(5000), busy.work);
    const queued = [queue.submit("a", later(5000), async () => "a1"), queue.submit("a", later(5000), async () => "a2")];
    expect(await queue.submit("a", later(5000), async () => "a3")).toEqual({ full: true });
    const b = queue.submit("b", later(5000), async () => "b1");
    busy.open();
    expect(await Promise.all([running, ...queued, b])).toEqual([{ done: "running" }, { done: "a1" }, { done: "a2" }, { done: "b1" }]);
  });

  test("when the queue is full a newcomer gets in: the newest work of the longest line gives way", async () => {
    const queue = new FairQueue({ slots: 1, maxWaiting: 4, perClient: 3 });
    const busy = gate("running");
    const running = queue.submit("a", later(5000), busy.work);
    const a = [1, 2, 3].map((i) => queue.submit("a", later(5000), async () => `a${i}`));
    const b1 = queue.submit("b", later(5000), async () => "b1");
    expect(queue.load).toEqual({ running: 1, waiting: 4 });
    // c is new: a's newest is bumped (told the queue is full) and c joins the line.
    const c1 = queue.submit("c", later(5000), async () => "c1");
    expect(await a[2]).toEqual({ full: true });
    // d is new too: a's line (2) is still longer than d's would be (1), so a gives way again.
    const d1 = queue.submit("d", later(5000), async () => "d1");
    expect(await a[1]).toEqual({ full: true });
    // Every line is 1 long now: a newcomer would only take another's place, so it is refused, as is
    // more work from a client already in line.
    expect(await queue.submit("e", later(5000), async () => "e1")).toEqual({ full: true });
    expect(await queue.submit("b", later(5000), async () => "b2")).toEqual({ full: true });
    busy.open();
    expect(await Promise.all([running, a[0], b1, c1, d1])).toEqual([{ done: "running" }, { done: "a1" }, { done: "b1" }, { done: "c1" }, { done: "d1" }]);
    expect(queue.load).toEqual({ running: 0, waiting: 0 });
  });
});
