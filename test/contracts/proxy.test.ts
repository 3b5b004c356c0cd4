import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type Address, getContract, type Hash, maxUint64, parseEventLogs, parseGwei, type TransactionReceipt } from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import { proxyAbi, proxyDeployedBytecode } from "../../src/chain/artifacts/index.ts";
import { type Anvil, deployContracts, expectRevert, gasCost, mined, startAnvil } from "../support/anvil.ts";

const SPACE = 0;
const TRAFFIC = 1;
const THREE_YEARS = 3n * 365n * 24n * 3600n;
const zero = "0x0000000000000000000000000000000000000000" as const;

let anvil: Anvil;

beforeAll(async () => {
  anvil = await startAnvil();
});

afterAll(async () => {
  await anvil.stop();
});

/** A fresh deployment per test, so settings changed by one test never leak into another. */
async function setup() {
  const [owner, operator, user, stranger] = await Promise.all([
    anvil.newAccount(),
    anvil.newAccount(),
    anvil.newAccount(),
    anvil.newAccount(),
  ]);
  const deployment = await deployContracts(anvil.wallet(owner), anvil.publicClient, { operator: operator.address });
  const as = (account: PrivateKeyAccount) =>
    getContract({
      address: deployment.proxy,
      abi: proxyAbi,
      client: { public: anvil.publicClient, wallet: anvil.wallet(account) },
    });
  return { owner, operator, user, stranger, address: deployment.proxy, as, deployment };
}

const send = (hash: Promise<Hash>) => mined(anvil.publicClient, hash);
const events = (receipt: TransactionReceipt) =>
  parseEventLogs({ abi: proxyAbi, logs: receipt.logs }).map(({ eventName, args }) => ({ eventName, args }));
const balance = (address: Address) => anvil.publicClient.getBalance({ address });
const blockTime = async (receipt: TransactionReceipt) =>
  (await anvil.publicClient.getBlock({ blockNumber: receipt.blockNumber })).timestamp;

/** Moves the chain's clock so that the next block has exactly `timestamp`, and mines it. */
async function mineAt(timestamp: bigint) {
  await anvil.testClient.setNextBlockTimestamp({ timestamp });
  await anvil.testClient.mine({ blocks: 1 });
}

describe("Proxy deployment", () => {
  test("the deployer is owner, the operator is set, and defaults match the design", async () => {
    const { owner, operator, as, address } = await setup();
    const proxy = as(owner);
    expect(await proxy.read.owner()).toBe(owner.address);
    expect(await proxy.read.operator()).toBe(operator.address);
    expect(await proxy.read.spacePrice()).toBe(1_000_000_000n);
    expect(await proxy.read.trafficPrice()).toBe(100_000_000n);
    expect(await proxy.read.validity()).toBe(THREE_YEARS);
    expect(await proxy.read.SPACE()).toBe(SPACE);
    expect(await proxy.read.TRAFFIC()).toBe(TRAFFIC);
    // The committed runtime code is what a gateway compares eth_getCode against.
    expect(await anvil.publicClient.getCode({ address })).toBe(proxyDeployedBytecode);
  });

  test("the constructor announces owner and operator", async () => {
    const { owner, operator, address } = await setup();
    const logs = await anvil.publicClient.getContractEvents({ address, abi: proxyAbi, fromBlock: 0n });
    expect(logs.map(({ eventName, args }) => ({ eventName, args }))).toEqual([
      { eventName: "OwnershipTransferred", args: { previousOwner: zero, newOwner: owner.address } },
      { eventName: "OperatorChanged", args: { previousOperator: zero, newOperator: operator.address } },
    ]);
  });
});

describe("deposits", () => {
  test("deposit, depositFor and a plain transfer credit the right user", async () => {
    const { user, stranger, as, address } = await setup();
    const r1 = await send(as(user).write.deposit({ value: 5n }));
    expect(events(r1)).toEqual([{ eventName: "Deposited", args: { user: user.address, amount: 5n, newBalance: 5n } }]);

    const r2 = await send(as(stranger).write.depositFor([user.address], { value: 7n }));
    expect(events(r2)).toEqual([{ eventName: "Deposited", args: { user: user.address, amount: 7n, newBalance: 12n } }]);

    const r3 = await send(anvil.wallet(stranger).sendTransaction({ to: address, value: 3n }));
    expect(events(r3)).toEqual([
      { eventName: "Deposited", args: { user: stranger.address, amount: 3n, newBalance: 3n } },
    ]);

    expect(await as(user).read.depositOf([user.address])).toBe(12n);
    expect(await as(user).read.depositOf([stranger.address])).toBe(3n);
    expect(await balance(address)).toBe(15n);
    const [, spaceDeposit] = await as(user).read.spaceRecord([user.address]);
    const [, trafficDeposit] = await as(user).read.trafficRecord([user.address]);
    expect(spaceDeposit).toBe(12n);
    expect(trafficDeposit).toBe(12n);
  });

  test("empty deposits and deposits for the zero address revert", async () => {
    const { user, as } = await setup();
    await expectRevert(as(user).write.deposit({ value: 0n }), "ZeroAmount", []);
    await expectRevert(as(user).write.depositFor([user.address], { value: 0n }), "ZeroAmount", []);
    await expectRevert(as(user).write.depositFor([zero], { value: 1n }), "ZeroAddress", []);
  });

  test("withdraw returns currency to the user and refuses more than the deposit", async () => {
    const { user, as, address } = await setup();
    const proxy = as(user);
    await send(proxy.write.deposit({ value: parseGwei("10") }));
    await expectRevert(proxy.write.withdraw([parseGwei("10") + 1n]), "InsufficientDeposit", [
      parseGwei("10"),
      parseGwei("10") + 1n,
    ]);
    await expectRevert(proxy.write.withdraw([0n]), "ZeroAmount", []);

    const before = await balance(user.address);
    const receipt = await send(proxy.write.withdraw([parseGwei("4")]));
    expect(events(receipt)).toEqual([
      { eventName: "Withdrawn", args: { user: user.address, amount: parseGwei("4"), newBalance: parseGwei("6") } },
    ]);
    expect(await balance(user.address)).toBe(before + parseGwei("4") - gasCost(receipt));
    expect(await proxy.read.depositOf([user.address])).toBe(parseGwei("6"));
    expect(await balance(address)).toBe(parseGwei("6"));
  });

  test("a user can only withdraw their own deposit", async () => {
    const { user, stranger, as } = await setup();
    await send(as(user).write.deposit({ value: 100n }));
    await expectRevert(as(stranger).write.withdraw([1n]), "InsufficientDeposit", [0n, 1n]);
    expect(await as(user).read.depositOf([user.address])).toBe(100n);
  });
});

describe("purchases", () => {
  test("buySpace debits the deposit, pays the owner (not the operator) and opens a period", async () => {
    const { owner, operator, user, as, address } = await setup();
    await send(as(user).write.deposit({ value: parseGwei("1000") }));
    const ownerBefore = await balance(owner.address);
    const operatorBefore = await balance(operator.address);

    const receipt = await send(as(operator).write.buySpace([user.address, 300n, 0n]));
    const now = await blockTime(receipt);
    const cost = 300n * 1_000_000_000n;
    expect(events(receipt)).toEqual([
      {
        eventName: "Purchased",
        args: { user: user.address, kind: SPACE, bytes_: 300n, cost, nonce: 1n, expire: now + THREE_YEARS },
      },
    ]);
    expect(await balance(owner.address)).toBe(ownerBefore + cost);
    expect(await balance(operator.address)).toBe(operatorBefore - gasCost(receipt));
    expect(await balance(address)).toBe(parseGwei("1000") - cost);
    expect(await as(user).read.spaceRecord([user.address])).toEqual([
      1n,
      parseGwei("1000") - cost,
      300n,
      0n,
      now + THREE_YEARS,
      now,
    ]);
    // The traffic record is a separate pool with its own nonce.
    expect(await as(user).read.trafficRecord([user.address])).toEqual([0n, parseGwei("1000") - cost, 0n, 0n, 0n, 0n]);
  });

  test("buyTraffic uses the traffic price and the traffic record", async () => {
    const { owner, operator, user, as } = await setup();
    await send(as(user).write.deposit({ value: parseGwei("1000") }));
    const ownerBefore = await balance(owner.address);
    const receipt = await send(as(operator).write.buyTraffic([user.address, 2000n, 0n]));
    const now = await blockTime(receipt);
    const cost = 2000n * 100_000_000n;
    expect(events(receipt)).toEqual([
      {
        eventName: "Purchased",
        args: { user: user.address, kind: TRAFFIC, bytes_: 2000n, cost, nonce: 1n, expire: now + THREE_YEARS },
      },
    ]);
    expect(await balance(owner.address)).toBe(ownerBefore + cost);
    expect(await as(user).read.trafficRecord([user.address])).toEqual([
      1n,
      parseGwei("1000") - cost,
      2000n,
      0n,
      now + THREE_YEARS,
      now,
    ]);
    expect(await as(user).read.spaceRecord([user.address])).toEqual([0n, parseGwei("1000") - cost, 0n, 0n, 0n, 0n]);
  });

  test("a purchase with a stale nonce reverts, so a retried request never buys twice", async () => {
    const { operator, user, as } = await setup();
    await send(as(user).write.deposit({ value: parseGwei("1000") }));
    await expectRevert(as(operator).write.buySpace([user.address, 1n, 1n]), "NonceMismatch", [1n, 0n]);
    await send(as(operator).write.buySpace([user.address, 1n, 0n]));
    await expectRevert(as(operator).write.buySpace([user.address, 1n, 0n]), "NonceMismatch", [0n, 1n]);
    await expectRevert(as(operator).write.buyTraffic([user.address, 1n, 1n]), "NonceMismatch", [1n, 0n]);
    await send(as(operator).write.buySpace([user.address, 1n, 1n]));
    const [nonce, , purchased] = await as(user).read.spaceRecord([user.address]);
    expect(nonce).toBe(2n);
    expect(purchased).toBe(2n);
  });

  test("too small a deposit reverts with have and need, and changes nothing", async () => {
    const { operator, user, as } = await setup();
    await send(as(user).write.deposit({ value: 999n * 1_000_000_000n }));
    await expectRevert(as(operator).write.buySpace([user.address, 1000n, 0n]), "InsufficientDeposit", [
      999n * 1_000_000_000n,
      1000n * 1_000_000_000n,
    ]);
    await expectRevert(as(operator).write.buyTraffic([user.address, 10_000n, 0n]), "InsufficientDeposit", [
      999n * 1_000_000_000n,
      10_000n * 100_000_000n,
    ]);
    expect(await as(user).read.spaceRecord([user.address])).toEqual([0n, 999n * 1_000_000_000n, 0n, 0n, 0n, 0n]);
  });

  test("only the operator can buy, and zero bytes or the zero address are refused", async () => {
    const { owner, operator, user, as } = await setup();
    await send(as(user).write.deposit({ value: parseGwei("1000") }));
    for (const account of [owner, user]) {
      await expectRevert(as(account).write.buySpace([user.address, 1n, 0n]), "NotOperator", [account.address]);
      await expectRevert(as(account).write.buyTraffic([user.address, 1n, 0n]), "NotOperator", [account.address]);
    }
    await expectRevert(as(operator).write.buySpace([user.address, 0n, 0n]), "ZeroBytes", []);
    await expectRevert(as(operator).write.buyTraffic([user.address, 0n, 0n]), "ZeroBytes", []);
    await expectRevert(as(operator).write.buySpace([zero, 1n, 0n]), "ZeroAddress", []);
  });

  test("a treasury that refuses payment makes the purchase revert with TransferFailed", async () => {
    const { owner, operator, user, as, deployment } = await setup();
    await send(as(user).write.deposit({ value: parseGwei("1000") }));
    // The Directory has no receive function, so it cannot take payments.
    await send(as(owner).write.transferOwnership([deployment.directory]));
    await expectRevert(as(operator).write.buySpace([user.address, 5n, 0n]), "TransferFailed", [
      deployment.directory,
      5n * 1_000_000_000n,
    ]);
    expect(await as(user).read.depositOf([user.address])).toBe(parseGwei("1000"));
  });

  test("with zero prices a purchase is free and still recorded", async () => {
    const { owner, operator, user, as } = await setup();
    await send(as(owner).write.setPrices([0n, 0n]));
    const receipt = await send(as(operator).write.buySpace([user.address, 10n, 0n]));
    expect(events(receipt)[0]?.args).toMatchObject({ cost: 0n, nonce: 1n });
    const [nonce, deposit, purchased] = await as(user).read.spaceRecord([user.address]);
    expect([nonce, deposit, purchased]).toEqual([1n, 0n, 10n]);
  });
});

describe("periods", () => {
  test("bytes add up within a period and the expiry only moves forward", async () => {
    const { owner, operator, user, as } = await setup();
    await send(as(user).write.deposit({ value: parseGwei("1000") }));
    const first = await send(as(operator).write.buySpace([user.address, 100n, 0n]));
    const start = await blockTime(first);

    await anvil.testClient.increaseTime({ seconds: 1000 });
    const second = await send(as(operator).write.buySpace([user.address, 50n, 1n]));
    const later = await blockTime(second);
    expect(later).toBeGreaterThanOrEqual(start + 1000n);

    // A short grant inside a long period adds bytes but does not pull the expiry back.
    const grant = await send(as(owner).write.grantFree([user.address, SPACE, 25n, 60n]));
    expect(events(grant)).toEqual([
      {
        eventName: "FreeGranted",
        args: { user: user.address, kind: SPACE, bytes_: 25n, nonce: 3n, expire: later + THREE_YEARS },
      },
    ]);
    const [nonce, , purchased, free, expire, periodStart] = await as(user).read.spaceRecord([user.address]);
    expect({ nonce, purchased, free, expire, periodStart }).toEqual({
      nonce: 3n,
      purchased: 150n,
      free: 25n,
      expire: later + THREE_YEARS,
      periodStart: start,
    });
  });

  test("a purchase at or after expiry starts a new period and old bytes stop counting", async () => {
    const { owner, operator, user, as } = await setup();
    await send(as(user).write.deposit({ value: parseGwei("1000") }));
    await send(as(owner).write.setValidity([3600n]));
    const first = await send(as(operator).write.buySpace([user.address, 100n, 0n]));
    const grant = await send(as(owner).write.grantFree([user.address, SPACE, 40n, 0n]));
    const start = await blockTime(first);
    const expire = (await blockTime(grant)) + 3600n;
    expect((await as(user).read.spaceRecord([user.address]))[4]).toBe(expire);

    // Still inside the period one second before expiry.
    await anvil.testClient.setNextBlockTimestamp({ timestamp: expire - 1n });
    const inside = await send(as(operator).write.buySpace([user.address, 1n, 2n]));
    expect(await blockTime(inside)).toBe(expire - 1n);
    expect((await as(user).read.spaceRecord([user.address])).slice(2)).toEqual([101n, 40n, expire - 1n + 3600n, start]);

    // Exactly at the (extended) expiry the period is over.
    const newExpire = expire - 1n + 3600n;
    await anvil.testClient.setNextBlockTimestamp({ timestamp: newExpire });
    const renewal = await send(as(operator).write.buySpace([user.address, 7n, 3n]));
    expect(await blockTime(renewal)).toBe(newExpire);
    expect(events(renewal)[0]?.args).toMatchObject({ bytes_: 7n, nonce: 4n, expire: newExpire + 3600n });
    const [nonce, , purchased, free, recordExpire, periodStart] = await as(user).read.spaceRecord([user.address]);
    expect({ nonce, purchased, free, recordExpire, periodStart }).toEqual({
      nonce: 4n,
      purchased: 7n,
      free: 0n,
      recordExpire: newExpire + 3600n,
      periodStart: newExpire,
    });
  });

  test("a grant after expiry starts a new period too, with its own validity", async () => {
    const { owner, operator, user, as } = await setup();
    await send(as(user).write.deposit({ value: parseGwei("1000") }));
    await send(as(owner).write.setValidity([100n]));
    await send(as(operator).write.buyTraffic([user.address, 500n, 0n]));
    await anvil.testClient.increaseTime({ seconds: 200 });
    await anvil.testClient.mine({ blocks: 1 });

    const grant = await send(as(owner).write.grantFree([user.address, TRAFFIC, 9n, 86_400n]));
    const now = await blockTime(grant);
    expect(events(grant)).toEqual([
      {
        eventName: "FreeGranted",
        args: { user: user.address, kind: TRAFFIC, bytes_: 9n, nonce: 2n, expire: now + 86_400n },
      },
    ]);
    const [nonce, , purchased, free, expire, periodStart] = await as(user).read.trafficRecord([user.address]);
    expect({ nonce, purchased, free, expire, periodStart }).toEqual({
      nonce: 2n,
      purchased: 0n,
      free: 9n,
      expire: now + 86_400n,
      periodStart: now,
    });
  });

  test("the record keeps its last numbers after expiry until the next purchase or grant", async () => {
    // The gateway judges expiry by the latest block time; the contract never rewrites a record
    // on its own, so the raw numbers stay readable.
    const { owner, operator, user, as } = await setup();
    await send(as(user).write.deposit({ value: parseGwei("1000") }));
    await send(as(owner).write.setValidity([50n]));
    const receipt = await send(as(operator).write.buySpace([user.address, 10n, 0n]));
    const start = await blockTime(receipt);
    await mineAt(start + 500n);
    const latest = await anvil.publicClient.getBlock();
    const [, , purchased, , expire] = await as(user).read.spaceRecord([user.address]);
    expect(purchased).toBe(10n);
    expect(expire).toBe(start + 50n);
    expect(latest.timestamp).toBeGreaterThan(expire);
  });
});

describe("free grants", () => {
  test("grantFree is owner-only and validates its arguments", async () => {
    const { operator, user, owner, as } = await setup();
    for (const account of [operator, user]) {
      await expectRevert(as(account).write.grantFree([user.address, SPACE, 1n, 0n]), "NotOwner", [account.address]);
    }
    await expectRevert(as(owner).write.grantFree([user.address, 2, 1n, 0n]), "InvalidKind", [2]);
    await expectRevert(as(owner).write.grantFree([user.address, SPACE, 0n, 0n]), "ZeroBytes", []);
    await expectRevert(as(owner).write.grantFree([zero, SPACE, 1n, 0n]), "ZeroAddress", []);
  });

  test("a grant with validity 0 uses the default validity and leaves the deposit alone", async () => {
    const { owner, user, as } = await setup();
    const receipt = await send(as(owner).write.grantFree([user.address, SPACE, 1234n, 0n]));
    const now = await blockTime(receipt);
    expect(await as(user).read.spaceRecord([user.address])).toEqual([1n, 0n, 0n, 1234n, now + THREE_YEARS, now]);
  });

  test("byte counts and expiry that would not fit in uint64 revert", async () => {
    const { owner, user, as } = await setup();
    await send(as(owner).write.grantFree([user.address, SPACE, maxUint64, 0n]));
    await expectRevert(as(owner).write.grantFree([user.address, SPACE, 1n, 0n]), "QuotaOverflow", []);
    await expectRevert(as(owner).write.grantFree([user.address, TRAFFIC, 1n, maxUint64]), "ExpireOverflow", []);
  });
});

describe("administration", () => {
  test("setPrices changes what purchases cost", async () => {
    const { owner, operator, user, as } = await setup();
    const receipt = await send(as(owner).write.setPrices([7n, 3n]));
    expect(events(receipt)).toEqual([{ eventName: "PricesChanged", args: { spacePrice: 7n, trafficPrice: 3n } }]);
    expect(await as(user).read.spacePrice()).toBe(7n);
    expect(await as(user).read.trafficPrice()).toBe(3n);
    await send(as(user).write.deposit({ value: 1000n }));
    await send(as(operator).write.buySpace([user.address, 10n, 0n]));
    await send(as(operator).write.buyTraffic([user.address, 10n, 0n]));
    expect(await as(user).read.depositOf([user.address])).toBe(1000n - 70n - 30n);
  });

  test("setValidity changes how long a purchase lasts and refuses 0", async () => {
    const { owner, operator, user, as } = await setup();
    const receipt = await send(as(owner).write.setValidity([86_400n]));
    expect(events(receipt)).toEqual([{ eventName: "ValidityChanged", args: { validity: 86_400n } }]);
    await expectRevert(as(owner).write.setValidity([0n]), "InvalidValidity", []);
    await send(as(user).write.deposit({ value: parseGwei("1") }));
    const buy = await send(as(operator).write.buySpace([user.address, 1n, 0n]));
    expect((await as(user).read.spaceRecord([user.address]))[4]).toBe((await blockTime(buy)) + 86_400n);
  });

  test("setOperator moves the buying right; the zero operator switches purchases off", async () => {
    const { owner, operator, user, stranger, as } = await setup();
    await send(as(user).write.deposit({ value: parseGwei("1000") }));
    const receipt = await send(as(owner).write.setOperator([stranger.address]));
    expect(events(receipt)).toEqual([
      { eventName: "OperatorChanged", args: { previousOperator: operator.address, newOperator: stranger.address } },
    ]);
    await expectRevert(as(operator).write.buySpace([user.address, 1n, 0n]), "NotOperator", [operator.address]);
    await send(as(stranger).write.buySpace([user.address, 1n, 0n]));

    await send(as(owner).write.setOperator([zero]));
    await expectRevert(as(stranger).write.buySpace([user.address, 1n, 1n]), "NotOperator", [stranger.address]);
  });

  test("transferOwnership hands over settings and the treasury", async () => {
    const { owner, operator, user, stranger, as } = await setup();
    await send(as(user).write.deposit({ value: parseGwei("1000") }));
    await expectRevert(as(owner).write.transferOwnership([zero]), "ZeroAddress", []);
    const receipt = await send(as(owner).write.transferOwnership([stranger.address]));
    expect(events(receipt)).toEqual([
      { eventName: "OwnershipTransferred", args: { previousOwner: owner.address, newOwner: stranger.address } },
    ]);
    expect(await as(user).read.owner()).toBe(stranger.address);
    await expectRevert(as(owner).write.setPrices([1n, 1n]), "NotOwner", [owner.address]);

    const oldOwnerBefore = await balance(owner.address);
    const newOwnerBefore = await balance(stranger.address);
    await send(as(operator).write.buySpace([user.address, 10n, 0n]));
    expect(await balance(owner.address)).toBe(oldOwnerBefore);
    expect(await balance(stranger.address)).toBe(newOwnerBefore + 10n * 1_000_000_000n);
  });

  test("every owner setting refuses the operator and users", async () => {
    const { operator, user, as } = await setup();
    for (const account of [operator, user]) {
      const proxy = as(account);
      await expectRevert(proxy.write.setOperator([account.address]), "NotOwner", [account.address]);
      await expectRevert(proxy.write.transferOwnership([account.address]), "NotOwner", [account.address]);
      await expectRevert(proxy.write.setPrices([0n, 0n]), "NotOwner", [account.address]);
      await expectRevert(proxy.write.setValidity([1n]), "NotOwner", [account.address]);
    }
  });
});
