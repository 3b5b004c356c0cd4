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
    const queue = new FairQueue({ slots: 1, maxWaiting: 100 });
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
    const queue = new FairQueue({ slots: 1, maxWaiting: 100 });
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
    const queue = new FairQueue({ slots: 1, maxWaiting: 100 });
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
    const queue = new FairQueue({ slots: 1, maxWaiting: 1 });
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
});
