/**
 * The injected wallet (EIP-1193, `window.ethereum`): sign-in with SIWE through the account API,
 * the storage session (one Login signature, then one SessionGrant for the console's session
 * key, D19), the wallet client that sends transactions (deposits, directory entries), and the
 * encryption client (D20) whose age identity the wallet's EncryptionKey signature unwraps.
 */
import { createWalletClient, custom, getAddress, type EIP1193Provider, type LocalAccount, type WalletClient } from "viem";
import { toAccount } from "viem/accounts";
import { defineStowageChain } from "../../chain/define.ts";
import { storageDomain } from "../../identity/eip712.ts";
import type { AccountClient } from "../../sdk/account.ts";
import { connectDirectory, type DirectoryClient } from "../../sdk/directory.ts";
import { connectGateway, type Gateway } from "../../sdk/chain.ts";
import type { EncryptionClient } from "../../sdk/encryption.ts";
import { sessionGrantTypes } from "../../sdk/grants.ts";
import { connectStorage, type StorageClient } from "../../sdk/storage.ts";
import { bearer, gatewayInfo, type Session } from "./session.ts";

/** How long a session key may sign: well inside D19's 24 h. */
const GRANT_SECONDS = 8 * 3600;

export const provider = () => (globalThis as { ethereum?: EIP1193Provider }).ethereum;

async function walletFor(address?: `0x${string}`): Promise<{ client: WalletClient; address: `0x${string}` }> {
  const p = provider();
  if (!p) throw new Error("No wallet found in this browser: install one, or sign in by email");
  const info = await gatewayInfo();
  const client = createWalletClient({ chain: defineStowageChain(info.chainId, info.rpcUrl), transport: custom(p) });
  const accounts = address ? [address] : await client.requestAddresses();
  const first = accounts[0];
  if (!first) throw new Error("The wallet shared no account");
  return { client, address: getAddress(first) };
}

/** SIWE: the account API's challenge, signed by the wallet (one prompt). */
export async function signInWithWallet(account: AccountClient): Promise<`0x${string}`> {
  const { client, address } = await walletFor();
  await account.loginWithEvmAccount({ address, signMessage: ({ message }) => client.signMessage({ account: address, message }) });
  return address;
}

/**
 * Starts signing without a prompt per file: the wallet signs the storage login (D4) and then the
 * grant that lets the session key sign uploads, deletes and vouchers until `validUntil`.
 */
export async function grantStorage(s: Session): Promise<void> {
  if (!s.storage || !s.sessionKey || !s.address) throw new Error("storage needs a DID: sign in with a wallet");
  const { client, address } = await walletFor(s.address);
  const domain = storageDomain(s.info.chainId, s.info.contracts.proxy);
  // The same typed data, sent to the wallet (eth_signTypedData_v4) for its address. The cast
  // bridges the generic signatures of a local account and a wallet client, which take the same object.
  const signTypedData = ((args: Parameters<LocalAccount["signTypedData"]>[0]) => client.signTypedData({ ...args, account: address } as Parameters<typeof client.signTypedData>[0])) as LocalAccount["signTypedData"];
  // The wallet signs the storage login: a session key may never log in.
  const withWallet = await connectStorage({ baseUrl: location.origin, account: s.sessionKey, did: s.did, loginSigner: { signTypedData }, tokenProvider: async () => (await bearer(s)).authorization.slice(7) });
  await withWallet.login();
  const validUntil = Math.floor(Date.now() / 1000) + GRANT_SECONDS;
  const signature = await client.signTypedData({ account: address, domain, types: sessionGrantTypes, primaryType: "SessionGrant", message: { key: s.sessionKey.address, validUntil: BigInt(validUntil) } });
  if (!s.grants) throw new Error("storage needs a DID: sign in with a wallet");
  await s.grants.register({ key: s.sessionKey.address, validUntil, signature });
  s.storage = withWallet;
  s.grantedUntil = validUntil;
}

/** The chain and the directory with the wallet sending the transactions. */
export async function chainOf(s: Session): Promise<{ gateway: Gateway; directory: DirectoryClient }> {
  if (!s.address) throw new Error("this needs a wallet");
  const p = provider();
  if (!p) throw new Error("No wallet found in this browser");
  const opts = { account: { address: s.address, type: "json-rpc" as const }, walletTransport: custom(p) };
  const [gateway, directory] = await Promise.all([connectGateway(location.origin, opts), connectDirectory(location.origin, opts)]);
  return { gateway, directory };
}

const encryptions = new WeakMap<StorageClient, Promise<EncryptionClient>>();

/**
 * The encryption client (D20) of the granted storage session: files sealed to the account's age
 * identity before they leave the page, opened after download. The wallet signs `EncryptionKey`
 * (twice at the account's first use, to prove it signs deterministically; once per page after)
 * and sends the transaction that publishes the recipient on the DID; the session key signs the
 * uploads as for any file. One per storage client, so the identity is unwrapped once a page.
 */
export function encryptionOf(s: Session): Promise<EncryptionClient> {
  const store = s.storage;
  if (!store || !s.address || s.grantedUntil === undefined) return Promise.reject(new Error("start a storage session first"));
  let enc = encryptions.get(store);
  if (!enc) {
    enc = (async () => {
      const p = provider();
      if (!p) throw new Error("No wallet found in this browser");
      const { client, address } = await walletFor(s.address);
      // Typed data to the wallet (eth_signTypedData_v4); it never signs raw transactions, so
      // the publishing transaction goes to it whole (walletTransport) and this refuses.
      const account = toAccount({
        address,
        signMessage: ({ message }) => client.signMessage({ account: address, message }),
        signTypedData: ((args: Parameters<LocalAccount["signTypedData"]>[0]) => client.signTypedData({ ...args, account: address } as Parameters<typeof client.signTypedData>[0])) as LocalAccount["signTypedData"],
        signTransaction: async () => {
          throw new Error("a browser wallet sends its own transactions");
        },
      });
      // Loaded on first use: age and its AEAD (libsodium's WASM) are half the console's script.
      const { connectEncryption } = await import("../../sdk/encryption.ts");
      return connectEncryption({ baseUrl: location.origin, store, account, walletTransport: custom(p) });
    })();
    enc.catch(() => encryptions.delete(store));
    encryptions.set(store, enc);
  }
  return enc;
}
