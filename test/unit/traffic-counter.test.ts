// The SDK's voucher counter (src/sdk/traffic-counter.ts) alone, against a counter held here: the
// gateway's side of it is tested through the SDK in test/storage/sdk-voucher-counter.
import { expect, test } from "bun:test";
import { TrafficCounter } from "../../src/sdk/traffic-counter.ts";

/** A gateway's counter as this test moves it, and how often it was asked for. */
function counted(start: bigint) {
  const state = { used: start, asks: 0, clock: 0 };
  const counter = new TrafficCounter(
    async () => {
      state.asks++;
      return state.used;
    },
    () => state.clock,
  );
  /** One transfer of `bytes` the gateway counts whole: its voucher's size. */
  const transfer = async (bytes: number) => {
    const t = await counter.begin(bytes);
    state.used += BigInt(bytes);
    t.end(bytes);
    return t.size;
  };
  return { state, counter, transfer };
}

test("kept between transfers, asked for again once a minute has passed", async () => {
  const { state, transfer } = counted(1_000n);
  await transfer(100);
  state.clock += 30_000;
  await transfer(100);
  expect(state.asks).toBe(1);
  // Unseen by this client (another device), then more than a minute after the last ask.
  state.used += 5_000n;
  state.clock += 30_001;
  const size = await transfer(100);
  expect(state.asks).toBe(2);
  expect(size - (state.used - 100n)).toBeGreaterThanOrEqual(100n);
  expect(size - (state.used - 100n)).toBeLessThan(100n + 1024n);
});

test("a transfer begun while another is open asks, and its answer does not replace the kept count", async () => {
  const { state, counter } = counted(0n);
  const first = await counter.begin(10_000);
  // Its voucher taken, its bytes counted (a body still being read): the gateway's count moved.
  first.answered();
  state.used += 10_000n;
  const second = await counter.begin(20);
  expect(state.asks).toBe(2);
  expect(second.size).toBeGreaterThanOrEqual(10_020n);
  second.answered();
  state.used += 20n;
  second.end(20);
  first.end(10_000);
  // Alone again: the kept count (0 + 20 + 10,000) is the gateway's; taking the second's answer
  // (10,000) as the count would have counted the first transfer twice.
  const third = await counter.begin(5);
  expect(state.asks).toBe(2);
  expect(third.size).toBeGreaterThanOrEqual(10_025n);
  expect(third.size).toBeLessThan(10_025n + 1024n);
});
