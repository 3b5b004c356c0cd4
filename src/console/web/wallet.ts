/**
 * The injected wallet (EIP-1193, `window.ethereum`): sign-in with SIWE through the account API,
 * the storage session (one SIWE grant with a ReCap for the console's session key, D19: the
 * wallet checks its domain against this page, and its registration opens the key's storage
 * session, so the wallet signs no storage login), the wallet client that sends transactions
 * (deposits, directory entries), and the encryption client (D20) whose age identity the
 * wallet's EncryptionKey signature (this gateway's domain, the account's salt) unwraps.
 */
import { createWalletClient, custom, getAddress, type EIP1193Provider, type LocalAccount, type WalletClient } from "viem";
import { toAccount } from "viem/accounts";
import { defineStowageChain } from "../../chain/define.ts";
import type { AccountClient } from "../../sdk/account.ts";
import { connectDirectory, type DirectoryClient } from "../../sdk/directory.ts";
import { connectGateway, type Gateway } from "../../sdk/chain.ts";
import type { EncryptionClient } from "../../sdk/encryption.ts";
import { grantSessionKey } from "../../sdk/grants.ts";
import type { StorageClient } from "../../sdk/storage.ts";
import { gatewayInfo, type Session } from "./session.ts";

/** How long a session key may sign: well inside D19's 24 h. */
const GRANT_SECONDS = 8 * 3600;

export const provider = () => (globalThis as { ethereum?: EIP1193Provider }).ethereum;

/** What a page says when this browser has no wallet: the guidance panel (noWallet) says more. */
export const NO_WALLET = "No wallet in this browser: install a wallet extension and reload this page, or use the command line";

async function walletFor(address?: `0x${string}`): Promise<{ client: WalletClient; address: `0x${string}` }> {
  const p = provider();
  if (!p) throw new Error(NO_WALLET);
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
 * Links the wallet to the signed-in account, which has none (an email, password or messenger
 * account): the wallet signs one message naming the account (no transaction, no fee), and the
 * account client then holds a session that acts for the wallet's DID.
 */
export async function linkWallet(account: AccountClient): Promise<`0x${string}`> {
  const { client, address } = await walletFor();
  await account.linkWallet({ address, signMessage: ({ message }) => client.signMessage({ account: address, message }) });
  return address;
}

/**
 * Starts signing without a prompt per file: the wallet signs one EIP-4361 message granting the
 * session key uploads, deletes and vouchers until its expiry; its registration opens the key's
 * storage session.
 */
export async function grantStorage(s: Session): Promise<void> {
  if (!s.storage || !s.sessionKey || !s.address || !s.did || !s.grants) throw new Error("storing files needs a wallet: link one on the Account page, or sign in with it");
  const { client, address } = await walletFor(s.address);
  const granted = await grantSessionKey({
    grants: s.grants,
    origin: location.origin,
    address,
    did: s.did,
    key: s.sessionKey.address,
    chainId: s.info.chainId,
    seconds: GRANT_SECONDS,
    signMessage: (message) => client.signMessage({ account: address, message }),
  });
  s.storage.useSession(granted.token);
  s.grantedUntil = granted.validUntil;
}

/** The chain and the directory with the wallet sending the transactions. */
export async function chainOf(s: Session): Promise<{ gateway: Gateway; directory: DirectoryClient }> {
  if (!s.address) throw new Error("this needs a wallet: link one on the Account page");
  const p = provider();
  if (!p) throw new Error(NO_WALLET);
  const opts = { account: { address: s.address, type: "json-rpc" as const }, walletTransport: custom(p) };
  const [gateway, directory] = await Promise.all([connectGateway(location.origin, opts), connectDirectory(location.origin, opts)]);
  return { gateway, directory };
}

const encryptions = new WeakMap<StorageClient, Promise<EncryptionClient>>();

/**
 * The encryption client (D20) of the granted storage session: files sealed to the account's age
 * identity before they leave the page, opened after download. The wallet signs `EncryptionKey`
 * (twice at the account's first use, to prove it signs deterministically; once per page after;
 * an identity wrapped the earlier way once more, and the replacement request that re-wraps it)
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
      if (!p) throw new Error(NO_WALLET);
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
