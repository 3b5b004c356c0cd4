/** The shared/exclusive lock between imports and gc. */
import { describe, expect, test } from "bun:test";
import { SharedExclusiveLock } from "../../../src/storage/ipfs/lock.ts";

const settled = async (p: Promise<unknown>) => {
  let done = false;
  void p.then(() => (done = true));
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
};

describe("SharedExclusiveLock", () => {
  test("shared holders run together; exclusive waits for all of them", async () => {
    const lock = new SharedExclusiveLock();
    const a = await lock.shared();
    const b = await lock.shared();
    const ex = lock.exclusive();
    expect(await settled(ex)).toBe(false);
    a();
    a(); // releasing twice counts once
    expect(await settled(ex)).toBe(false);
    b();
    const release = await ex;
    expect(lock.state).toEqual({ shared: 0, exclusive: true, waiting: 0 });
    release();
  });

  test("shared waits while exclusive is held, then all waiting shared holders go", async () => {
    const lock = new SharedExclusiveLock();
    const ex = await lock.exclusive();
    const s1 = lock.shared();
    const s2 = lock.shared();
    expect(await settled(s1)).toBe(false);
    expect(lock.state.waiting).toBe(2);
    ex();
    (await s1)();
    (await s2)();
    expect(lock.state).toEqual({ shared: 0, exclusive: false, waiting: 0 });
  });

  test("a new shared holder does not queue behind a waiting exclusive one (no deadlock with pending uploads)", async () => {
    const lock = new SharedExclusiveLock();
    const pendingUpload = await lock.shared();
    const gc = lock.exclusive();
    const nextUpload = lock.shared();
    expect(await settled(nextUpload)).toBe(true); // granted at once, not queued behind gc
    expect(lock.state).toEqual({ shared: 2, exclusive: false, waiting: 1 });
    (await nextUpload)();
    expect(await settled(gc)).toBe(false); // gc still waits for the pending upload
    pendingUpload();
    const release = await gc;
    expect(lock.state).toEqual({ shared: 0, exclusive: true, waiting: 0 });
    release();
  });
});
