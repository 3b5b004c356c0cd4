import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  type Address,
  encodePacked,
  getContract,
  type Hash,
  type Hex,
  keccak256,
  maxUint256,
  parseEventLogs,
  parseSignature,
  stringToHex,
  type TransactionReceipt,
} from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import { didRegistryAbi, didRegistryDeployedBytecode } from "../../src/chain/artifacts/index.ts";
import { type Anvil, deployContracts, expectRevert, mined, startAnvil } from "../support/anvil.ts";

const zero = "0x0000000000000000000000000000000000000000" as const;
const zero32 = `0x${"00".repeat(32)}` as const;
const sigAuth = stringToHex("sigAuth", { size: 32 });
const veriKey = stringToHex("veriKey", { size: 32 });
const serviceName = stringToHex("did/svc/Storage", { size: 32 });

let anvil: Anvil;
let registry: Address;

beforeAll(async () => {
  anvil = await startAnvil();
  const deployer = await anvil.newAccount();
  ({ didRegistry: registry } = await deployContracts(anvil.wallet(deployer), anvil.publicClient, {
    operator: deployer.address,
  }));
});

afterAll(async () => {
  await anvil.stop();
});

const as = (account: PrivateKeyAccount) =>
  getContract({ address: registry, abi: didRegistryAbi, client: { public: anvil.publicClient, wallet: anvil.wallet(account) } });
const read = () => getContract({ address: registry, abi: didRegistryAbi, client: anvil.publicClient }).read;
const send = (hash: Promise<Hash>) => mined(anvil.publicClient, hash);
const events = (receipt: TransactionReceipt) =>
  parseEventLogs({ abi: didRegistryAbi, logs: receipt.logs }).map(({ eventName, args }) => ({ eventName, args }));
const blockTime = async (receipt: TransactionReceipt) =>
  (await anvil.publicClient.getBlock({ blockNumber: receipt.blockNumber })).timestamp;
const typeHash = (delegateType: Hex) => keccak256(encodePacked(["bytes32"], [delegateType]));

/** Signs an ERC-1056 meta-transaction: 0x19 0x00, registry, owner's nonce, identity, operation. */
async function signOperation(signer: PrivateKeyAccount, identity: Address, operation: Hex) {
  const nonce = await read().nonce([signer.address]);
  const digest = keccak256(
    encodePacked(
      ["bytes1", "bytes1", "address", "uint256", "address", "bytes"],
      ["0x19", "0x00", registry, nonce, identity, operation],
    ),
  );
  const { r, s, yParity } = parseSignature(await signer.sign({ hash: digest }));
  return { v: 27 + yParity, r, s };
}

describe("DIDRegistry", () => {
  test("every address owns itself until it names another owner", async () => {
    const identity = await anvil.newAccount();
    expect(await read().identityOwner([identity.address])).toBe(identity.address);
    expect(await read().owners([identity.address])).toBe(zero);
    expect(await read().changed([identity.address])).toBe(0n);
    expect(await anvil.publicClient.getCode({ address: registry })).toBe(didRegistryDeployedBytecode);
  });

  test("changeOwner moves control and links the change to the previous one", async () => {
    const [identity, next, stranger] = await Promise.all([anvil.newAccount(), anvil.newAccount(), anvil.newAccount()]);
    const first = await send(as(identity).write.changeOwner([identity.address, next.address]));
    expect(events(first)).toEqual([
      { eventName: "DIDOwnerChanged", args: { identity: identity.address, owner: next.address, previousChange: 0n } },
    ]);
    expect(await read().identityOwner([identity.address])).toBe(next.address);
    expect(await read().owners([identity.address])).toBe(next.address);
    expect(await read().changed([identity.address])).toBe(first.blockNumber);

    await expectRevert(as(identity).write.changeOwner([identity.address, identity.address]), "NotIdentityOwner", [
      identity.address,
      identity.address,
    ]);
    await expectRevert(as(stranger).write.changeOwner([identity.address, stranger.address]), "NotIdentityOwner", [
      identity.address,
      stranger.address,
    ]);

    const second = await send(as(next).write.changeOwner([identity.address, identity.address]));
    expect(events(second)[0]?.args).toEqual({
      identity: identity.address,
      owner: identity.address,
      previousChange: first.blockNumber,
    });
    expect(await read().identityOwner([identity.address])).toBe(identity.address);
  });

  test("a delegate is valid for its type until its validity ends", async () => {
    const [identity, key] = await Promise.all([anvil.newAccount(), anvil.newAccount()]);
    const receipt = await send(as(identity).write.addDelegate([identity.address, sigAuth, key.address, 100n]));
    const validTo = (await blockTime(receipt)) + 100n;
    expect(events(receipt)).toEqual([
      {
        eventName: "DIDDelegateChanged",
        args: { identity: identity.address, delegateType: sigAuth, delegate: key.address, validTo, previousChange: 0n },
      },
    ]);
    expect(await read().delegates([identity.address, typeHash(sigAuth), key.address])).toBe(validTo);
    expect(await read().validDelegate([identity.address, sigAuth, key.address])).toBe(true);
    expect(await read().validDelegate([identity.address, veriKey, key.address])).toBe(false);
    expect(await read().changed([identity.address])).toBe(receipt.blockNumber);

    await anvil.testClient.setNextBlockTimestamp({ timestamp: validTo });
    await anvil.testClient.mine({ blocks: 1 });
    expect(await read().validDelegate([identity.address, sigAuth, key.address])).toBe(false);
  });

  test("revokeDelegate ends a delegate at once", async () => {
    const [identity, key] = await Promise.all([anvil.newAccount(), anvil.newAccount()]);
    const added = await send(as(identity).write.addDelegate([identity.address, veriKey, key.address, 86_400n]));
    const revoked = await send(as(identity).write.revokeDelegate([identity.address, veriKey, key.address]));
    expect(events(revoked)).toEqual([
      {
        eventName: "DIDDelegateChanged",
        args: {
          identity: identity.address,
          delegateType: veriKey,
          delegate: key.address,
          validTo: await blockTime(revoked),
          previousChange: added.blockNumber,
        },
      },
    ]);
    expect(await read().validDelegate([identity.address, veriKey, key.address])).toBe(false);
  });

  test("only the current owner manages delegates and attributes", async () => {
    const [identity, next, key] = await Promise.all([anvil.newAccount(), anvil.newAccount(), anvil.newAccount()]);
    const refused = [identity.address, key.address] as const;
    await expectRevert(as(key).write.addDelegate([identity.address, sigAuth, key.address, 1n]), "NotIdentityOwner", refused);
    await expectRevert(as(key).write.revokeDelegate([identity.address, sigAuth, key.address]), "NotIdentityOwner", refused);
    await expectRevert(as(key).write.setAttribute([identity.address, serviceName, "0x01", 1n]), "NotIdentityOwner", refused);
    await expectRevert(as(key).write.revokeAttribute([identity.address, serviceName, "0x01"]), "NotIdentityOwner", refused);

    // After a change of owner the identity's own key is just another stranger.
    await send(as(identity).write.changeOwner([identity.address, next.address]));
    await expectRevert(
      as(identity).write.addDelegate([identity.address, sigAuth, key.address, 1n]),
      "NotIdentityOwner",
      [identity.address, identity.address],
    );
    await send(as(next).write.addDelegate([identity.address, sigAuth, key.address, 1000n]));
    expect(await read().validDelegate([identity.address, sigAuth, key.address])).toBe(true);
  });

  test("attributes live in events: set with a validity, revoked with validTo 0", async () => {
    const identity = await anvil.newAccount();
    const value = stringToHex("https://stowage.example/");
    const set = await send(as(identity).write.setAttribute([identity.address, serviceName, value, 3600n]));
    expect(events(set)).toEqual([
      {
        eventName: "DIDAttributeChanged",
        args: {
          identity: identity.address,
          name: serviceName,
          value,
          validTo: (await blockTime(set)) + 3600n,
          previousChange: 0n,
        },
      },
    ]);
    const revoked = await send(as(identity).write.revokeAttribute([identity.address, serviceName, value]));
    expect(events(revoked)).toEqual([
      {
        eventName: "DIDAttributeChanged",
        args: { identity: identity.address, name: serviceName, value, validTo: 0n, previousChange: set.blockNumber },
      },
    ]);
  });

  test("a validity that would overflow reverts", async () => {
    const [identity, key] = await Promise.all([anvil.newAccount(), anvil.newAccount()]);
    await expectRevert(as(identity).write.addDelegate([identity.address, sigAuth, key.address, maxUint256]), "ValidityTooLong", []);
    await expectRevert(as(identity).write.setAttribute([identity.address, serviceName, "0x", maxUint256]), "ValidityTooLong", []);
  });

  test("a resolver can walk the whole history backwards through previousChange", async () => {
    const [identity, key, next] = await Promise.all([anvil.newAccount(), anvil.newAccount(), anvil.newAccount()]);
    await send(as(identity).write.addDelegate([identity.address, sigAuth, key.address, 3600n]));
    await send(as(identity).write.setAttribute([identity.address, serviceName, "0xabcd", 3600n]));
    await send(as(identity).write.changeOwner([identity.address, next.address]));
    await send(as(next).write.revokeDelegate([identity.address, sigAuth, key.address]));

    const seen: string[] = [];
    let block = await read().changed([identity.address]);
    while (block !== 0n) {
      const logs = await anvil.publicClient.getContractEvents({
        address: registry,
        abi: didRegistryAbi,
        args: { identity: identity.address },
        fromBlock: block,
        toBlock: block,
      });
      expect(logs.length).toBe(1);
      const log = logs[0];
      if (!log) break;
      seen.push(log.eventName);
      block = log.args.previousChange ?? 0n;
    }
    expect(seen).toEqual(["DIDDelegateChanged", "DIDOwnerChanged", "DIDAttributeChanged", "DIDDelegateChanged"]);
  });
});

describe("DIDRegistry signed operations", () => {
  test("changeOwnerSigned lets a relayer submit the owner's signature, once", async () => {
    const [identity, next, relayer] = await Promise.all([anvil.newAccount(), anvil.newAccount(), anvil.newAccount()]);
    const { v, r, s } = await signOperation(identity, identity.address, encodePacked(["string", "address"], ["changeOwner", next.address]));
    const receipt = await send(as(relayer).write.changeOwnerSigned([identity.address, v, r, s, next.address]));
    expect(events(receipt)).toEqual([
      { eventName: "DIDOwnerChanged", args: { identity: identity.address, owner: next.address, previousChange: 0n } },
    ]);
    expect(await read().identityOwner([identity.address])).toBe(next.address);
    expect(await read().nonce([identity.address])).toBe(1n);
    // The nonce moved (and the owner changed), so the same signature is worthless now.
    await expectRevert(as(relayer).write.changeOwnerSigned([identity.address, v, r, s, next.address]), "InvalidSignature", []);
  });

  test("a signature from anyone but the owner is refused", async () => {
    const [identity, stranger] = await Promise.all([anvil.newAccount(), anvil.newAccount()]);
    const { v, r, s } = await signOperation(stranger, identity.address, encodePacked(["string", "address"], ["changeOwner", stranger.address]));
    await expectRevert(as(stranger).write.changeOwnerSigned([identity.address, v, r, s, stranger.address]), "InvalidSignature", []);
    expect(await read().identityOwner([identity.address])).toBe(identity.address);
  });

  test("an unrecoverable signature cannot act for the zero identity", async () => {
    // ecrecover yields the zero address for garbage, and the zero identity's default owner is
    // the zero address: without an explicit check anyone could take it over.
    const stranger = await anvil.newAccount();
    await expectRevert(as(stranger).write.changeOwnerSigned([zero, 27, zero32, zero32, stranger.address]), "InvalidSignature", []);
    expect(await read().identityOwner([zero])).toBe(zero);
  });

  test("addDelegateSigned and revokeDelegateSigned follow the owner's signatures", async () => {
    const [identity, key, relayer] = await Promise.all([anvil.newAccount(), anvil.newAccount(), anvil.newAccount()]);
    const add = await signOperation(
      identity,
      identity.address,
      encodePacked(["string", "bytes32", "address", "uint256"], ["addDelegate", sigAuth, key.address, 600n]),
    );
    const added = await send(
      as(relayer).write.addDelegateSigned([identity.address, add.v, add.r, add.s, sigAuth, key.address, 600n]),
    );
    expect(events(added)[0]).toEqual({
      eventName: "DIDDelegateChanged",
      args: {
        identity: identity.address,
        delegateType: sigAuth,
        delegate: key.address,
        validTo: (await blockTime(added)) + 600n,
        previousChange: 0n,
      },
    });
    expect(await read().validDelegate([identity.address, sigAuth, key.address])).toBe(true);

    const revoke = await signOperation(
      identity,
      identity.address,
      encodePacked(["string", "bytes32", "address"], ["revokeDelegate", sigAuth, key.address]),
    );
    // Signed for a different delegate type: the digest differs, so the signer does not match.
    await expectRevert(
      as(relayer).write.revokeDelegateSigned([identity.address, revoke.v, revoke.r, revoke.s, veriKey, key.address]),
      "InvalidSignature",
      [],
    );
    await send(as(relayer).write.revokeDelegateSigned([identity.address, revoke.v, revoke.r, revoke.s, sigAuth, key.address]));
    expect(await read().validDelegate([identity.address, sigAuth, key.address])).toBe(false);
    expect(await read().nonce([identity.address])).toBe(2n);
  });

  test("setAttributeSigned and revokeAttributeSigned emit the owner's attribute changes", async () => {
    const [identity, next, relayer] = await Promise.all([anvil.newAccount(), anvil.newAccount(), anvil.newAccount()]);
    // Signed operations of a changed identity need the new owner's key and nonce.
    await send(as(identity).write.changeOwner([identity.address, next.address]));
    const value = "0x1234" as const;
    const set = await signOperation(
      next,
      identity.address,
      encodePacked(["string", "bytes32", "bytes", "uint256"], ["setAttribute", serviceName, value, 60n]),
    );
    const setReceipt = await send(
      as(relayer).write.setAttributeSigned([identity.address, set.v, set.r, set.s, serviceName, value, 60n]),
    );
    expect(events(setReceipt)[0]?.args).toMatchObject({ name: serviceName, value, validTo: (await blockTime(setReceipt)) + 60n });

    const revoke = await signOperation(
      next,
      identity.address,
      encodePacked(["string", "bytes32", "bytes"], ["revokeAttribute", serviceName, value]),
    );
    const revokeReceipt = await send(
      as(relayer).write.revokeAttributeSigned([identity.address, revoke.v, revoke.r, revoke.s, serviceName, value]),
    );
    expect(events(revokeReceipt)[0]?.args).toEqual({
      identity: identity.address,
      name: serviceName,
      value,
      validTo: 0n,
      previousChange: setReceipt.blockNumber,
    });
    expect(await read().nonce([next.address])).toBe(2n);
  });
});
