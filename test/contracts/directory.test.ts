import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  type Address,
  getAddress,
  getContract,
  type Hash,
  type Hex,
  parseEventLogs,
  parseAbi,
  parseGwei,
  type TransactionReceipt,
} from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import solc from "solc";
import { directoryAbi, directoryDeployedBytecode } from "../../src/chain/artifacts/index.ts";
import { type Anvil, deployContracts, expectRevert, gasCost, mined, startAnvil } from "../support/anvil.ts";

const zero = "0x0000000000000000000000000000000000000000" as const;
const directoryErrors = directoryAbi.filter((item) => item.type === "error");
const MID = "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4";

let anvil: Anvil;
let directory: Address;
let serial = 0;

beforeAll(async () => {
  anvil = await startAnvil();
  const deployer = await anvil.newAccount();
  ({ directory } = await deployContracts(anvil.wallet(deployer), anvil.publicClient, { operator: deployer.address }));
});

afterAll(async () => {
  await anvil.stop();
});

const as = (account: PrivateKeyAccount) =>
  getContract({ address: directory, abi: directoryAbi, client: { public: anvil.publicClient, wallet: anvil.wallet(account) } });
const read = () => getContract({ address: directory, abi: directoryAbi, client: anvil.publicClient }).read;
const send = (hash: Promise<Hash>) => mined(anvil.publicClient, hash);
const events = (receipt: TransactionReceipt) =>
  parseEventLogs({ abi: directoryAbi, logs: receipt.logs }).map(({ eventName, args }) => ({ eventName, args }));
const balance = (address: Address) => anvil.publicClient.getBalance({ address });
/** Each test publishes under its own Mid, so tests sharing one deployment never collide. */
const freshMid = () => `${MID}-${++serial}`;

type Fields = { name: string; size: bigint; price: bigint; isPublic: boolean; keywords: string[] };
const sample: Fields = { name: "holiday.mp4", size: 1234n, price: 5n, isPublic: false, keywords: ["video", "beach"] };
const args = (mid: string, f: Fields) => [mid, f.name, f.size, f.price, f.isPublic, f.keywords] as const;

async function published(owner: PrivateKeyAccount, fields: Partial<Fields> = {}) {
  const mid = freshMid();
  const f = { ...sample, ...fields };
  await send(as(owner).write.publish(args(mid, f)));
  return mid;
}

describe("publish and update", () => {
  test("publish stores the entry, announces every field, and only the owner can read a private entry", async () => {
    const [owner, stranger] = await Promise.all([anvil.newAccount(), anvil.newAccount()]);
    const mid = freshMid();
    const receipt = await send(as(owner).write.publish(args(mid, sample)));
    expect(events(receipt)).toEqual([{ eventName: "Published", args: { owner: owner.address, mid, ...sample } }]);
    expect(await read().exists([owner.address, mid])).toBe(true);
    expect(await read().getEntry([owner.address, mid])).toEqual(sample);
    expect(await read().canRead([owner.address, mid, owner.address])).toBe(true);
    expect(await read().canRead([owner.address, mid, stranger.address])).toBe(false);
    expect(await anvil.publicClient.getCode({ address: directory })).toBe(directoryDeployedBytecode);
  });

  test("an owner cannot publish the same Mid twice, but another owner can publish it too", async () => {
    const [owner, other] = await Promise.all([anvil.newAccount(), anvil.newAccount()]);
    const mid = await published(owner);
    await expectRevert(as(owner).write.publish(args(mid, sample)), "EntryExists", [owner.address, mid]);
    await send(as(other).write.publish(args(mid, { ...sample, name: "other.mp4", isPublic: true })));
    expect((await read().getEntry([owner.address, mid])).name).toBe("holiday.mp4");
    expect((await read().getEntry([other.address, mid])).name).toBe("other.mp4");
    expect(await read().canRead([owner.address, mid, other.address])).toBe(false);
  });

  test("update replaces every field, keeps grants, and needs an existing entry of the sender", async () => {
    const [owner, reader, stranger] = await Promise.all([anvil.newAccount(), anvil.newAccount(), anvil.newAccount()]);
    const mid = await published(owner, { keywords: ["a", "b", "c"] });
    await send(as(owner).write.grantRead([mid, reader.address]));

    const changed: Fields = { name: "renamed.mp4", size: 99n, price: 0n, isPublic: false, keywords: ["z"] };
    const receipt = await send(as(owner).write.update(args(mid, changed)));
    expect(events(receipt)).toEqual([{ eventName: "Updated", args: { owner: owner.address, mid, ...changed } }]);
    expect(await read().getEntry([owner.address, mid])).toEqual(changed);
    expect(await read().canRead([owner.address, mid, reader.address])).toBe(true);

    const missing = freshMid();
    await expectRevert(as(owner).write.update(args(missing, changed)), "EntryNotFound", [owner.address, missing]);
    // Functions act on the sender's own entries: a stranger's update never reaches the owner's.
    await expectRevert(as(stranger).write.update(args(mid, changed)), "EntryNotFound", [stranger.address, mid]);
  });

  test("making an entry public opens it to everyone, and private again closes it", async () => {
    const [owner, stranger] = await Promise.all([anvil.newAccount(), anvil.newAccount()]);
    const mid = await published(owner);
    await send(as(owner).write.update(args(mid, { ...sample, isPublic: true })));
    expect(await read().canRead([owner.address, mid, stranger.address])).toBe(true);
    await send(as(owner).write.update(args(mid, { ...sample, isPublic: false })));
    expect(await read().canRead([owner.address, mid, stranger.address])).toBe(false);
  });
});

describe("caps", () => {
  const ascii = (n: number) => "x".repeat(n);

  test("Mid must be 1 to 128 bytes", async () => {
    const owner = await anvil.newAccount();
    await expectRevert(as(owner).write.publish(args("", sample)), "InvalidMid", [0n]);
    await expectRevert(as(owner).write.publish(args(ascii(129), sample)), "InvalidMid", [129n]);
    await send(as(owner).write.publish(args(ascii(128), sample)));
    await send(as(owner).write.publish(args("m", sample)));
  });

  test("name must be 1 to 256 bytes, counted in UTF-8", async () => {
    const owner = await anvil.newAccount();
    const mid = freshMid();
    await expectRevert(as(owner).write.publish(args(mid, { ...sample, name: "" })), "InvalidName", [0n]);
    await expectRevert(as(owner).write.publish(args(mid, { ...sample, name: ascii(257) })), "InvalidName", [257n]);
    // 129 two-byte characters are 258 bytes although only 129 characters.
    await expectRevert(as(owner).write.publish(args(mid, { ...sample, name: "é".repeat(129) })), "InvalidName", [258n]);
    await send(as(owner).write.publish(args(mid, { ...sample, name: "é".repeat(128) })));
    await expectRevert(as(owner).write.update(args(mid, { ...sample, name: ascii(257) })), "InvalidName", [257n]);
    await send(as(owner).write.update(args(mid, { ...sample, name: ascii(256) })));
  });

  test("at most 16 keywords of 1 to 64 bytes each", async () => {
    const owner = await anvil.newAccount();
    const mid = freshMid();
    const sixteen = Array.from({ length: 16 }, (_, i) => `k${i}`);
    await expectRevert(as(owner).write.publish(args(mid, { ...sample, keywords: [...sixteen, "k16"] })), "TooManyKeywords", [17n]);
    await expectRevert(as(owner).write.publish(args(mid, { ...sample, keywords: ["ok", ""] })), "InvalidKeyword", [1n, 0n]);
    await expectRevert(as(owner).write.publish(args(mid, { ...sample, keywords: [ascii(65)] })), "InvalidKeyword", [0n, 65n]);
    await send(as(owner).write.publish(args(mid, { ...sample, keywords: [...sixteen.slice(1), ascii(64)] })));
    expect((await read().getEntry([owner.address, mid])).keywords).toEqual([...sixteen.slice(1), ascii(64)]);
    await expectRevert(as(owner).write.update(args(mid, { ...sample, keywords: [...sixteen, "k16"] })), "TooManyKeywords", [17n]);
    await send(as(owner).write.update(args(mid, { ...sample, keywords: [] })));
    expect((await read().getEntry([owner.address, mid])).keywords).toEqual([]);
  });
});

describe("grants", () => {
  test("grantRead and revokeRead open and close one reader's access", async () => {
    const [owner, reader, other] = await Promise.all([anvil.newAccount(), anvil.newAccount(), anvil.newAccount()]);
    const mid = await published(owner);
    const granted = await send(as(owner).write.grantRead([mid, reader.address]));
    expect(events(granted)).toEqual([{ eventName: "ReadGranted", args: { owner: owner.address, mid, reader: reader.address } }]);
    expect(await read().canRead([owner.address, mid, reader.address])).toBe(true);
    expect(await read().canRead([owner.address, mid, other.address])).toBe(false);
    await expectRevert(as(owner).write.grantRead([mid, reader.address]), "AlreadyGranted", [reader.address]);

    const revoked = await send(as(owner).write.revokeRead([mid, reader.address]));
    expect(events(revoked)).toEqual([{ eventName: "ReadRevoked", args: { owner: owner.address, mid, reader: reader.address } }]);
    expect(await read().canRead([owner.address, mid, reader.address])).toBe(false);
    await expectRevert(as(owner).write.revokeRead([mid, reader.address]), "NotGranted", [reader.address]);
  });

  test("grants need an entry of the sender and a real reader", async () => {
    const [owner, stranger] = await Promise.all([anvil.newAccount(), anvil.newAccount()]);
    const mid = await published(owner);
    await expectRevert(as(owner).write.grantRead([mid, zero]), "ZeroAddress", []);
    const missing = freshMid();
    await expectRevert(as(owner).write.grantRead([missing, stranger.address]), "EntryNotFound", [owner.address, missing]);
    // A stranger cannot grant themselves the owner's entry: grants act on the sender's entries.
    await expectRevert(as(stranger).write.grantRead([mid, stranger.address]), "EntryNotFound", [stranger.address, mid]);
    await expectRevert(as(stranger).write.revokeRead([mid, stranger.address]), "EntryNotFound", [stranger.address, mid]);
    expect(await read().canRead([owner.address, mid, stranger.address])).toBe(false);
  });
});

describe("buyRead", () => {
  test("pays the owner exactly the price, refunds the excess and opens access", async () => {
    const [owner, buyer] = await Promise.all([anvil.newAccount(), anvil.newAccount()]);
    const mid = await published(owner, { price: 5n });
    const ownerBefore = await balance(owner.address);
    const buyerBefore = await balance(buyer.address);
    const contractBefore = await balance(directory);

    const receipt = await send(as(buyer).write.buyRead([owner.address, mid], { value: parseGwei("7") }));
    expect(events(receipt)).toEqual([
      { eventName: "ReadBought", args: { owner: owner.address, mid, reader: buyer.address, paid: parseGwei("5") } },
    ]);
    expect(await balance(owner.address)).toBe(ownerBefore + parseGwei("5"));
    expect(await balance(buyer.address)).toBe(buyerBefore - parseGwei("5") - gasCost(receipt));
    expect(await balance(directory)).toBe(contractBefore);
    expect(await read().canRead([owner.address, mid, buyer.address])).toBe(true);
    await expectRevert(as(buyer).write.buyRead([owner.address, mid], { value: parseGwei("5") }), "AlreadyReadable", [
      buyer.address,
    ]);
  });

  test("the exact price is accepted and too little is refused", async () => {
    const [owner, buyer] = await Promise.all([anvil.newAccount(), anvil.newAccount()]);
    const mid = await published(owner, { price: 3n });
    await expectRevert(as(buyer).write.buyRead([owner.address, mid], { value: parseGwei("3") - 1n }), "InsufficientPayment", [
      parseGwei("3") - 1n,
      parseGwei("3"),
    ]);
    expect(await read().canRead([owner.address, mid, buyer.address])).toBe(false);
    await send(as(buyer).write.buyRead([owner.address, mid], { value: parseGwei("3") }));
    expect(await read().canRead([owner.address, mid, buyer.address])).toBe(true);
  });

  test("a free private entry can be claimed without payment", async () => {
    const [owner, buyer] = await Promise.all([anvil.newAccount(), anvil.newAccount()]);
    const mid = await published(owner, { price: 0n });
    const receipt = await send(as(buyer).write.buyRead([owner.address, mid]));
    expect(events(receipt)[0]?.args).toEqual({ owner: owner.address, mid, reader: buyer.address, paid: 0n });
    expect(await read().canRead([owner.address, mid, buyer.address])).toBe(true);
  });

  test("nobody pays for what they can already read, or for what does not exist", async () => {
    const [owner, reader, buyer] = await Promise.all([anvil.newAccount(), anvil.newAccount(), anvil.newAccount()]);
    const open = await published(owner, { isPublic: true });
    await expectRevert(as(buyer).write.buyRead([owner.address, open], { value: parseGwei("5") }), "AlreadyReadable", [buyer.address]);

    const closed = await published(owner);
    await expectRevert(as(owner).write.buyRead([owner.address, closed], { value: parseGwei("5") }), "AlreadyReadable", [owner.address]);
    await send(as(owner).write.grantRead([closed, reader.address]));
    await expectRevert(as(reader).write.buyRead([owner.address, closed], { value: parseGwei("5") }), "AlreadyReadable", [reader.address]);

    const missing = freshMid();
    await expectRevert(as(buyer).write.buyRead([owner.address, missing], { value: parseGwei("5") }), "EntryNotFound", [
      owner.address,
      missing,
    ]);
  });

  test("revoking grants leaves a purchase alone: the reader paid for it", async () => {
    const [owner, buyer] = await Promise.all([anvil.newAccount(), anvil.newAccount()]);
    const mid = await published(owner);
    await send(as(buyer).write.buyRead([owner.address, mid], { value: parseGwei("5") }));
    await expectRevert(as(owner).write.revokeRead([mid, buyer.address]), "NotGranted", [buyer.address]);
    expect(await read().canRead([owner.address, mid, buyer.address])).toBe(true);
  });
});

describe("unpublish", () => {
  test("removes the entry with its grants and purchases, so a re-publish starts clean", async () => {
    const [owner, reader, buyer] = await Promise.all([anvil.newAccount(), anvil.newAccount(), anvil.newAccount()]);
    const mid = await published(owner);
    await send(as(owner).write.grantRead([mid, reader.address]));
    await send(as(buyer).write.buyRead([owner.address, mid], { value: parseGwei("5") }));

    const receipt = await send(as(owner).write.unpublish([mid]));
    expect(events(receipt)).toEqual([{ eventName: "Unpublished", args: { owner: owner.address, mid } }]);
    expect(await read().exists([owner.address, mid])).toBe(false);
    await expectRevert(read().getEntry([owner.address, mid]), "EntryNotFound", [owner.address, mid]);
    for (const who of [owner, reader, buyer]) {
      expect(await read().canRead([owner.address, mid, who.address])).toBe(false);
    }
    await expectRevert(as(owner).write.unpublish([mid]), "EntryNotFound", [owner.address, mid]);
    await expectRevert(as(owner).write.grantRead([mid, reader.address]), "EntryNotFound", [owner.address, mid]);
    await expectRevert(as(buyer).write.buyRead([owner.address, mid], { value: parseGwei("5") }), "EntryNotFound", [
      owner.address,
      mid,
    ]);

    const fields: Fields = { name: "again.mp4", size: 1n, price: 2n, isPublic: false, keywords: [] };
    await send(as(owner).write.publish(args(mid, fields)));
    expect(await read().getEntry([owner.address, mid])).toEqual(fields);
    expect(await read().canRead([owner.address, mid, reader.address])).toBe(false);
    expect(await read().canRead([owner.address, mid, buyer.address])).toBe(false);
    // The old grant is gone, so granting again is a fresh grant rather than AlreadyGranted.
    await send(as(owner).write.grantRead([mid, reader.address]));
    await send(as(buyer).write.buyRead([owner.address, mid], { value: parseGwei("2") }));
    expect(await read().canRead([owner.address, mid, reader.address])).toBe(true);
    expect(await read().canRead([owner.address, mid, buyer.address])).toBe(true);
  });
});

describe("events are enough to rebuild the directory", () => {
  test("replaying the logs gives the same entries and access as the contract's views", async () => {
    const [owner, reader, buyer] = await Promise.all([anvil.newAccount(), anvil.newAccount(), anvil.newAccount()]);
    const fromBlock = await anvil.publicClient.getBlockNumber();
    const kept = await published(owner, { keywords: ["one"] });
    const dropped = await published(owner);
    await send(as(owner).write.update(args(kept, { ...sample, name: "kept.bin", keywords: ["two", "three"] })));
    await send(as(owner).write.grantRead([kept, reader.address]));
    await send(as(owner).write.grantRead([dropped, reader.address]));
    await send(as(buyer).write.buyRead([owner.address, dropped], { value: parseGwei("5") }));
    await send(as(owner).write.unpublish([dropped]));
    await send(as(buyer).write.buyRead([owner.address, kept], { value: parseGwei("5") }));
    await send(as(owner).write.revokeRead([kept, reader.address]));

    // A minimal indexer: entries by owner/mid, readers per entry, reset on unpublish.
    const entries = new Map<string, Fields>();
    const readers = new Map<string, Set<Address>>();
    const logs = await anvil.publicClient.getContractEvents({ address: directory, abi: directoryAbi, fromBlock });
    for (const log of logs) {
      const key = `${log.args.owner}/${log.args.mid}`;
      switch (log.eventName) {
        case "Published":
        case "Updated": {
          const { name, size, price, isPublic, keywords } = log.args;
          if (name === undefined || size === undefined || price === undefined || isPublic === undefined || !keywords) {
            throw new Error("incomplete event");
          }
          entries.set(key, { name, size, price, isPublic, keywords: [...keywords] });
          break;
        }
        case "Unpublished":
          entries.delete(key);
          readers.delete(key);
          break;
        case "ReadGranted":
        case "ReadBought":
          if (log.args.reader) readers.set(key, (readers.get(key) ?? new Set()).add(log.args.reader));
          break;
        case "ReadRevoked":
          if (log.args.reader) readers.get(key)?.delete(log.args.reader);
          break;
      }
    }

    for (const mid of [kept, dropped]) {
      const key = `${owner.address}/${mid}`;
      expect(await read().exists([owner.address, mid])).toBe(entries.has(key));
      if (entries.has(key)) expect(await read().getEntry([owner.address, mid])).toEqual(entries.get(key) as Fields);
      for (const who of [reader, buyer]) {
        const indexed = readers.get(key)?.has(who.address) ?? false;
        expect(await read().canRead([owner.address, mid, who.address])).toBe(indexed);
      }
    }
    expect(entries.get(`${owner.address}/${kept}`)?.name).toBe("kept.bin");
    expect(readers.get(`${owner.address}/${kept}`)).toEqual(new Set([buyer.address]));
  });
});

// A test-only contract that acts as an owner or a buyer whose receive() accepts, refuses, or calls
// back into the Directory. Compiled here so it never ships in the artifacts.
const probeSource = `// SPDX-License-Identifier: MIT
pragma solidity 0.8.30;
interface IDirectory {
    function publish(string calldata, string calldata, uint64, uint64, bool, string[] calldata) external;
    function buyRead(address, string calldata) external payable;
}
contract Probe {
    IDirectory private immutable directory;
    uint8 public mode; // 0 accept, 1 refuse, 2 re-enter buyRead(reenterOwner, reenterMid)
    address private reenterOwner;
    string private reenterMid;
    constructor(IDirectory d) { directory = d; }
    function setMode(uint8 m, address o, string calldata mid) external { mode = m; reenterOwner = o; reenterMid = mid; }
    function publish(string calldata mid, uint64 price) external {
        directory.publish(mid, "probe", 1, price, false, new string[](0));
    }
    function buy(address owner, string calldata mid) external payable { directory.buyRead{value: msg.value}(owner, mid); }
    receive() external payable {
        if (mode == 1) revert("refused");
        if (mode == 2) directory.buyRead(reenterOwner, reenterMid);
    }
}`;

// Typed by hand so calls are checked; the bytecode comes from compiling probeSource.
const probeAbi = parseAbi([
  "constructor(address directory)",
  "function setMode(uint8 m, address o, string mid)",
  "function publish(string mid, uint64 price)",
  "function buy(address owner, string mid) payable",
]);

function compileProbe(): Hex {
  const input = {
    language: "Solidity",
    sources: { "Probe.sol": { content: probeSource } },
    settings: { evmVersion: "paris", outputSelection: { "*": { Probe: ["evm.bytecode.object"] } } },
  };
  // solc-js types `compile` as any; standard JSON in, standard JSON out.
  const compile = solc.compile as (input: string) => string;
  const output = JSON.parse(compile(JSON.stringify(input))) as {
    errors?: { severity: string; formattedMessage: string }[];
    contracts?: { "Probe.sol"?: { Probe?: { evm: { bytecode: { object: string } } } } };
  };
  const errors = (output.errors ?? []).filter((e) => e.severity === "error");
  const probe = output.contracts?.["Probe.sol"]?.Probe;
  if (errors.length > 0 || !probe) throw new Error(errors.map((e) => e.formattedMessage).join("\n"));
  return `0x${probe.evm.bytecode.object}`;
}

describe("payments to contracts", () => {
  let probeBytecode: Hex;
  beforeAll(() => {
    probeBytecode = compileProbe();
  });

  async function deployProbe(by: PrivateKeyAccount): Promise<Address> {
    const hash = await anvil.wallet(by).deployContract({ abi: probeAbi, bytecode: probeBytecode, args: [directory] });
    const { contractAddress } = await send(Promise.resolve(hash));
    if (!contractAddress) throw new Error("probe not deployed");
    return getAddress(contractAddress);
  }
  // The Directory's errors bubble up through the probe; with them in the ABI viem can name them.
  const probeAs = (address: Address, account: PrivateKeyAccount) =>
    getContract({ address, abi: [...probeAbi, ...directoryErrors], client: { public: anvil.publicClient, wallet: anvil.wallet(account) } });

  test("an owner that refuses payment cannot be bought from", async () => {
    const [user, buyer] = await Promise.all([anvil.newAccount(), anvil.newAccount()]);
    const probe = await deployProbe(user);
    const mid = freshMid();
    await send(probeAs(probe, user).write.publish([mid, 4n]));
    await send(probeAs(probe, user).write.setMode([1, zero, ""]));
    await expectRevert(as(buyer).write.buyRead([probe, mid], { value: parseGwei("4") }), "TransferFailed", [
      probe,
      parseGwei("4"),
    ]);
    expect(await read().canRead([probe, mid, buyer.address])).toBe(false);
  });

  test("a buyer contract gets its refund, and one that re-enters during it is stopped", async () => {
    const [owner, user] = await Promise.all([anvil.newAccount(), anvil.newAccount()]);
    const probe = await deployProbe(user);
    const paid = await published(owner, { price: 1n });
    const free = await published(owner, { price: 0n });
    const buy = probeAs(probe, user).write;

    // Re-entering from the refund to claim a second entry for free must fail as a whole.
    await send(buy.setMode([2, owner.address, free]));
    await expectRevert(buy.buy([owner.address, paid], { value: parseGwei("2") }), "TransferFailed", [probe, parseGwei("1")]);
    expect(await read().canRead([owner.address, paid, probe])).toBe(false);
    expect(await read().canRead([owner.address, free, probe])).toBe(false);

    await send(buy.setMode([0, zero, ""]));
    await send(buy.buy([owner.address, paid], { value: parseGwei("2") }));
    expect(await read().canRead([owner.address, paid, probe])).toBe(true);
    expect(await balance(probe)).toBe(parseGwei("1"));
  });
});
