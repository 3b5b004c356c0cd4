/**
 * EVM login (spec 4.2 rows 10, 11; D2, D12) on a real anvil: plain keys, a deployed EIP-1271
 * wallet and an undeployed ERC-6492 wallet; and every way a sign-in message can be wrong.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createPublicClient, encodeFunctionData, getAddress, http, keccak256, serializeErc6492Signature, toHex, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { createSiweMessage, parseSiweMessage } from "viem/siwe";
import { SiweMessage } from "siwe";
import { accountsApp, bearer, evmLogin, ORIGIN, type Call } from "../support/accounts.ts";
import { mined, startAnvil, type Anvil } from "../support/anvil.ts";
import { testWalletFactoryAbi, testWalletFactoryBytecode } from "../support/artifacts/test-wallets.ts";

const newKey = () => privateKeyToAccount(generatePrivateKey());

let anvil: Anvil;
let factory: Address;
let deployer: PrivateKeyAccount;

beforeAll(async () => {
  anvil = await startAnvil();
  deployer = await anvil.newAccount();
  const receipt = await mined(anvil.publicClient, anvil.wallet(deployer).deployContract({ abi: testWalletFactoryAbi, bytecode: testWalletFactoryBytecode }));
  factory = getAddress(receipt.contractAddress!);
});
afterAll(() => anvil?.stop());

const salt = (label: string) => keccak256(toHex(label));
const predict = (owner: Address, s: Hex) => anvil.publicClient.readContract({ address: factory, abi: testWalletFactoryAbi, functionName: "predict", args: [owner, s] });

async function deployedWallet(owner: Address, label: string): Promise<Address> {
  const s = salt(label);
  await mined(anvil.publicClient, anvil.wallet(deployer).writeContract({ address: factory, abi: testWalletFactoryAbi, functionName: "deploy", args: [owner, s] }));
  return predict(owner, s);
}

/** Challenge for `address`; answers the message and a function to post it with a signature. */
async function challenge(call: Call, address: string, origin = ORIGIN) {
  const r = await call("GET", `/v2/login/evm/challenge?address=${address}`, { headers: { origin } });
  expect(r.status).toBe(200);
  const message = r.body.data as string;
  const post = (signature: string, msg = message) => call("POST", "/v2/login/evm", { body: { message: msg, signature, source: "test" } });
  return { message, post };
}

describe("EVM login", () => {
  // anvil starts in beforeAll, after this app is made: the app reaches it through these calls.
  const app = accountsApp({
    accounts: { publicClient: { verifyMessage: (args) => anvil.publicClient.verifyMessage(args), getChainId: () => anvil.publicClient.getChainId() } },
  });

  test("the challenge is an EIP-4361 message for the origin, the address and chain 985, valid 10 minutes", async () => {
    const key = newKey();
    const r = await app.call("GET", `/v2/login/evm/challenge?address=${key.address.toLowerCase()}`, { headers: { origin: ORIGIN } });
    expect(r.status).toBe(200);
    expect(r.body.result).toBe(1);
    const lines = (r.body.data as string).split("\n");
    expect(lines[0]).toBe("http://localhost:8080 wants you to sign in with your Ethereum account:");
    expect(lines[1]).toBe(key.address);
    const field = (name: string) => lines.find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2);
    expect(field("URI")).toBe(ORIGIN);
    expect(field("Version")).toBe("1");
    expect(field("Chain ID")).toBe("985");
    expect(field("Nonce")).toMatch(/^[a-zA-Z0-9]{8,}$/);
    const issued = Date.parse(field("Issued At") ?? "");
    expect(issued).toBe(app.clock.now());
    expect(Date.parse(field("Expiration Time") ?? "") - issued).toBe(10 * 60_000);
  });

  test("a plain key logs in: did:ethr:0x3d9:<EIP-55>, a number from 100001, and the same address is the same account", async () => {
    const key = newKey();
    const first = await evmLogin(app.call, key);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      result: 1,
      data: { did: `did:ethr:0x3d9:${key.address}`, number: expect.stringMatching(/^\d+$/), accessToken: expect.any(String), refreshToken: expect.any(String) },
    });
    const second = await evmLogin(app.call, key);
    expect(second.body.data.number).toBe(first.body.data.number);
    expect(await app.database.sql.all("SELECT id FROM users WHERE uid = $1", [key.address])).toHaveLength(1);
    const numbers = (await app.database.sql.all<{ number: number }>("SELECT number FROM users")).map((u) => u.number);
    expect(Math.min(...numbers)).toBe(100001);
    expect(new Set(numbers).size).toBe(numbers.length);
  });

  test("a deployed EIP-1271 wallet logs in with its owner's signature", async () => {
    const owner = newKey();
    const wallet = await deployedWallet(owner.address, "deployed-1");
    expect(await anvil.publicClient.getCode({ address: wallet })).toBeTruthy();
    const r = await evmLogin(app.call, owner, { address: wallet });
    expect(r.status).toBe(200);
    expect(r.body.data.did).toBe(`did:ethr:0x3d9:${wallet}`);
    const me = await app.call("GET", "/v2/auth/me", { headers: bearer(r.body.data.accessToken) });
    expect(me.body.data.uid).toBe(wallet);
  });

  test("a deployed wallet refuses a signature of a key that does not own it", async () => {
    const wallet = await deployedWallet(newKey().address, "deployed-2");
    const r = await evmLogin(app.call, newKey(), { address: wallet });
    expect(r).toMatchObject({ status: 401, body: { result: -1, error: "UNAUTHORIZED", message: "The signature does not match the message's address" } });
  });

  test("an undeployed wallet logs in with an ERC-6492 signature, and stays undeployed", async () => {
    const owner = newKey();
    const s = salt("counterfactual-1");
    const wallet = await predict(owner.address, s);
    expect(await anvil.publicClient.getCode({ address: wallet })).toBeUndefined();
    const deployData = encodeFunctionData({ abi: testWalletFactoryAbi, functionName: "deploy", args: [owner.address, s] });
    const wrap = (signature: string) => serializeErc6492Signature({ address: factory, data: deployData, signature: signature as Hex });
    const r = await evmLogin(app.call, owner, { address: wallet, wrap });
    expect(r.status).toBe(200);
    expect(r.body.data.did).toBe(`did:ethr:0x3d9:${wallet}`);
    expect(await anvil.publicClient.getCode({ address: wallet })).toBeUndefined();

    const impostor = newKey();
    const bad = await evmLogin(app.call, impostor, { address: wallet, wrap });
    expect(bad.status).toBe(401);
  });

  test("a signature by another key is refused, and the nonce is spent anyway", async () => {
    const key = newKey();
    const { message, post } = await challenge(app.call, key.address);
    const wrong = await post(await newKey().signMessage({ message }));
    expect(wrong.body).toEqual({ result: -1, error: "UNAUTHORIZED", message: "The signature does not match the message's address" });
    const retry = await post(await key.signMessage({ message }));
    expect(retry.body.message).toBe("The message's nonce was already used; ask for a new challenge");
  });

  test("a nonce works once", async () => {
    const key = newKey();
    const { message, post } = await challenge(app.call, key.address);
    const signature = await key.signMessage({ message });
    expect((await post(signature)).status).toBe(200);
    const replay = await post(signature);
    expect(replay).toMatchObject({ status: 401, body: { error: "UNAUTHORIZED", message: "The message's nonce was already used; ask for a new challenge" } });
  });

  test("a message past its expiration time is refused", async () => {
    const key = newKey();
    const { message, post } = await challenge(app.call, key.address);
    const signature = await key.signMessage({ message });
    app.clock.advance(10 * 60_000);
    expect((await post(signature)).body.message).toBe("The sign-in message has expired; ask for a new challenge");
  });

  test("a message edited to another domain is refused, even when signed by the key", async () => {
    const key = newKey();
    const { message, post } = await challenge(app.call, key.address);
    const edited = message.replace("http://localhost:8080 wants you", "https://evil.test wants you").replace(`URI: ${ORIGIN}`, "URI: https://evil.test");
    expect(edited).not.toBe(message);
    const r = await post(await key.signMessage({ message: edited }), edited);
    expect(r.body).toEqual({ result: -1, error: "UNAUTHORIZED", message: "The message's domain or URI is not an allowed origin" });
  });

  test("a message edited to another chain is refused", async () => {
    const key = newKey();
    const { message, post } = await challenge(app.call, key.address);
    const edited = message.replace("Chain ID: 985", "Chain ID: 1");
    const r = await post(await key.signMessage({ message: edited }), edited);
    expect(r.body.message).toBe("The message's chain id is not the chain of this server");
  });

  test("a message edited in any other way, or to another address, or with an unknown nonce is refused", async () => {
    const key = newKey();
    const other = newKey();
    const { message, post } = await challenge(app.call, key.address);
    const statement = message.replace("Sign in to Stowage", "Give all my tokens to");
    expect((await post(await key.signMessage({ message: statement }), statement)).body.message).toBe("The message differs from the challenge issued for its nonce");
    const swapped = message.replace(key.address, other.address);
    expect((await post(await other.signMessage({ message: swapped }), swapped)).body.message).toBe("The message's address is not the one the challenge was issued to");
    const unknown = message.replace(/Nonce: \w+/, "Nonce: abcdefgh12345678");
    expect((await post(await key.signMessage({ message: unknown }), unknown)).body.message).toBe("The message's nonce was not issued by this server");
    expect((await post("0x1234", "hello")).body).toEqual({ result: -1, error: "PARAM_ERROR", message: "message is not a sign-in message issued by this server" });
  });

  test("the challenge needs an allowed Origin (or a Referer of one), a valid address and this chain", async () => {
    const address = newKey().address;
    const get = (query: string, headers: Record<string, string>) => app.call("GET", `/v2/login/evm/challenge?${query}`, { headers });
    expect((await get(`address=${address}`, {})).body).toEqual({ result: -1, error: "PARAM_ERROR", message: "The Origin header is required" });
    expect(await get(`address=${address}`, { origin: "https://evil.test" })).toMatchObject({ status: 403, body: { error: "FORBIDDEN" } });
    expect((await get(`address=${address}`, { referer: `${ORIGIN}/login?x=1` })).status).toBe(200);
    expect((await get("address=0x1234", { origin: ORIGIN })).body.error).toBe("PARAM_ERROR");
    expect((await get(`address=${address}&chainid=1`, { origin: ORIGIN })).body).toEqual({
      result: -1,
      error: "PARAM_ERROR",
      message: "chainid is not the chain of this server: this server signs in on chain 985",
    });
    expect((await get(`address=${address}&chainid=985`, { origin: ORIGIN })).status).toBe(200);
    expect((await get(`address=${address}&chainid=abc`, { origin: ORIGIN })).body.error).toBe("PARAM_ERROR");
    expect((await get("", { origin: ORIGIN })).body.error).toBe("PARAM_ERROR");
  });

  test("a login without message, signature or source is a PARAM_ERROR", async () => {
    for (const body of [{ signature: "0x", source: "t" }, { message: "m", source: "t" }, { message: "m", signature: "0x" }]) {
      expect((await app.call("POST", "/v2/login/evm", { body })).body.error).toBe("PARAM_ERROR");
    }
  });
});

describe("EIP-4361 messages built by wallet libraries: fields are compared, not bytes (D14)", () => {
  const app = accountsApp();
  /** The challenge's fields, as a client reads them to build the message for its wallet. */
  const fieldsOf = (message: string) => {
    const f = parseSiweMessage(message);
    return { ...f, domain: f.domain!, address: f.address!, uri: f.uri!, version: "1" as const, chainId: f.chainId!, nonce: f.nonce! };
  };
  const crlf = (message: string) => message.replaceAll("\n", "\r\n");

  // `same`: the library writes our very text (accepted before D14 too); the others differ in bytes.
  const variants: [string, { same: boolean }, (challenge: string) => string][] = [
    ["viem's createSiweMessage, without the scheme", { same: false }, (c) => createSiweMessage({ ...fieldsOf(c), scheme: undefined })],
    ["viem's createSiweMessage, with the scheme", { same: true }, (c) => createSiweMessage(fieldsOf(c))],
    [
      "siwe's SiweMessage from the fields, without the scheme",
      { same: false },
      (c) => {
        const f = fieldsOf(c);
        const { domain, address, statement, uri, version, chainId, nonce } = f;
        return new SiweMessage({ domain, address, statement, uri, version, chainId, nonce, issuedAt: f.issuedAt?.toISOString(), expirationTime: f.expirationTime?.toISOString() }).prepareMessage();
      },
    ],
    ["siwe's SiweMessage parsing the challenge and writing it again", { same: true }, (c) => new SiweMessage(c).prepareMessage()],
    ["the challenge with CRLF line endings", { same: false }, crlf],
    ["the challenge with CRLF and without the scheme", { same: false }, (c) => crlf(c.replace("http://localhost:8080 wants", "localhost:8080 wants"))],
  ];

  for (const [name, { same }, build] of variants) {
    test(`${name} logs in`, async () => {
      const key = newKey();
      const { message, post } = await challenge(app.call, key.address);
      const built = build(message);
      expect(built === message).toBe(same);
      const r = await post(await key.signMessage({ message: built }), built);
      expect(r.status).toBe(200);
      expect(r.body.data.did).toBe(`did:ethr:0x3d9:${key.address}`);
    });
  }

  test("the nonce stays single-use across forms of the same message", async () => {
    const key = newKey();
    const { message, post } = await challenge(app.call, key.address);
    const viem = createSiweMessage({ ...fieldsOf(message), scheme: undefined });
    expect((await post(await key.signMessage({ message: viem }), viem)).status).toBe(200);
    for (const again of [message, crlf(message), viem]) {
      const r = await post(await key.signMessage({ message: again }), again);
      expect(r.body.message).toBe("The message's nonce was already used; ask for a new challenge");
    }
  });

  test("a library-built message with any field changed is refused, and the nonce is not spent", async () => {
    const key = newKey();
    const { message, post } = await challenge(app.call, key.address);
    const f = fieldsOf(message);
    const built = (o: Partial<Parameters<typeof createSiweMessage>[0]>) => createSiweMessage({ ...f, scheme: undefined, ...o });
    const tampered = "The message differs from the challenge issued for its nonce";
    const cases: [string, string][] = [
      [built({ statement: "Sign in to Stowage with this wallet and pay." }), tampered],
      [built({ statement: undefined }), tampered],
      [built({ issuedAt: new Date(f.issuedAt!.getTime() - 1000) }), tampered],
      [built({ expirationTime: new Date(f.expirationTime!.getTime() + 60_000) }), tampered],
      [built({ expirationTime: undefined }), tampered],
      [built({ notBefore: f.issuedAt }), tampered],
      [built({ requestId: "1" }), tampered],
      [built({ resources: ["https://evil.test/grant"] }), tampered],
      [built({ uri: `${ORIGIN}/other` }), "The message's domain or URI is not an allowed origin"],
      [built({ domain: "localhost:8081" }), "The message's domain or URI is not an allowed origin"],
      [built({ scheme: "https" }), "The message's domain or URI is not an allowed origin"],
      [built({ chainId: 1 }), "The message's chain id is not the chain of this server"],
      [built({ address: newKey().address }), "The message's address is not the one the challenge was issued to"],
    ];
    for (const [edited, answer] of cases) {
      expect(edited).not.toBe(message);
      const r = await post(await key.signMessage({ message: edited }), edited);
      expect({ status: r.status, message: r.body.message }).toEqual({ status: 401, message: answer });
    }
    // Not the grammar: a wrong address checksum, a line after the last field, mixed line endings.
    const malformed = "message is not a sign-in message issued by this server";
    const flip = key.address.search(/[a-fA-F]/);
    const letter = key.address[flip] as string;
    const wrongCase = `${key.address.slice(0, flip)}${letter === letter.toLowerCase() ? letter.toUpperCase() : letter.toLowerCase()}${key.address.slice(flip + 1)}`;
    const badChecksum = message.replace(key.address, wrongCase);
    expect(badChecksum).not.toBe(message);
    for (const edited of [badChecksum, `${message}\nNote: also send me your tokens`, message.replace("\n", "\r\n"), message.replace("Version: 1", "Version: 2")]) {
      const r = await post(await key.signMessage({ message: edited }), edited);
      expect({ status: r.status, message: r.body.message }).toEqual({ status: 400, message: malformed });
    }
    // Every refusal came before the nonce was spent: the challenge itself still logs in.
    expect((await post(await key.signMessage({ message }))).status).toBe(200);
  });

  test("an https origin: the message may leave out the scheme (EIP-4361's default) or write it", async () => {
    const { call } = accountsApp({ env: { STOWAGE_ALLOWED_ORIGINS: "https://app.example.com" } });
    for (const scheme of [undefined, "https"]) {
      const key = newKey();
      const { message, post } = await challenge(call, key.address, "https://app.example.com");
      expect(message).toStartWith("https://app.example.com wants you");
      const built = createSiweMessage({ ...fieldsOf(message), scheme });
      const r = await post(await key.signMessage({ message: built }), built);
      expect(r.status).toBe(200);
    }
  });
});

describe("EVM login with other settings", () => {
  test("STOWAGE_ALLOWED_ORIGINS and STOWAGE_CHAIN_ID shape the challenge and the did", async () => {
    const { call } = accountsApp({ env: { STOWAGE_ALLOWED_ORIGINS: "https://app.example.com, https://other.example.com", STOWAGE_CHAIN_ID: "31337" } });
    const key = newKey();
    expect((await call("GET", `/v2/login/evm/challenge?address=${key.address}`, { headers: { origin: ORIGIN } })).status).toBe(403);
    const r = await evmLogin(call, key, { origin: "https://other.example.com" });
    expect(r.status).toBe(200);
    expect(r.body.data.did).toBe(`did:ethr:0x7a69:${key.address}`);
  });

  test("without a chain client only plain keys can sign in", async () => {
    const { call } = accountsApp();
    expect((await evmLogin(call, newKey())).status).toBe(200);
    const owner = newKey();
    const wallet = await deployedWallet(owner.address, "no-client");
    expect((await evmLogin(call, owner, { address: wallet })).status).toBe(401);
  });

  test("a chain that does not answer makes a smart wallet's login a 503; plain keys still sign in", async () => {
    const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const deadUrl = `http://127.0.0.1:${probe.port}`;
    probe.stop(true);
    const dead = createPublicClient({ chain: anvil.chain, transport: http(deadUrl, { retryCount: 0 }) });
    const { call } = accountsApp({ accounts: { publicClient: dead } });
    expect((await evmLogin(call, newKey())).status).toBe(200);
    const owner = newKey();
    const wallet = await deployedWallet(owner.address, "dead-chain");
    const r = await evmLogin(call, owner, { address: wallet });
    expect(r).toMatchObject({ status: 503, body: { result: -1, error: "UNAVAILABLE" } });
  });
});
