/**
 * The account: who is signed in (spec 2.11, 2.12), its wallet, and points (2.13).
 *
 * An account made by email, password or a messenger has no wallet at first, and files, space and
 * the directory belong to a wallet's DID: this page links one (the wallet signs one message that
 * names the account), or, without a wallet in the browser, says how to get one. An account whose
 * wallet is linked but whose session began by email acts for no DID (only a signature proves the
 * wallet): the page offers the wallet's sign-in, which opens the same account.
 */
import { action, h, show, status, when } from "../dom.ts";
import { noWalletHelp } from "../guidance.ts";
import { begin, type Session } from "../session.ts";
import { linkWallet, provider, signInWithWallet } from "../wallet.ts";

/**
 * The two point-earning actions (the account API's action ids 5 and 6, which the spec calls a
 * liveness-check subscription and its renewal), in words a user knows.
 */
const ACTIONS: { id: number; label: string; button: string; done: string; once?: true }[] = [
  { id: 5, label: "Say that you use this account", button: "I use it", done: "Noted: you use this account", once: true },
  { id: 6, label: "Say again that you still use it (possible again some days after the last time)", button: "I still use it", done: "Noted again: you still use this account" },
];

export interface AccountPageNav {
  signOut: () => Promise<void>;
  /** Where to go once the session acts for a wallet (its files). */
  toFiles: () => void;
}

export async function accountPage(s: Session, nav: AccountPageNav) {
  const [me, info, ...records] = await Promise.all([s.account.me(), s.account.userInfo(), ...ACTIONS.map(({ id }) => s.account.getRecord(id))]);
  const rows: [field: string, label: string, value: string][] = [
    ["User", "Account", me.uid],
    ["Role", "Role", me.role],
    ["Name", "Name", info.name || "—"],
    ["Email", "Email", info.email ?? me.email ?? "—"],
    ["Address", "Wallet", info.address || "none yet"],
    ["DID", "Identity (DID)", info.did || "none yet: it comes with a wallet"],
    ["Points", "Points", String(info.points)],
  ];

  /** This tab's session acts for the wallet now: start its storage client and go to the files. */
  const walletReady = async (address: `0x${string}`, said: string) => {
    await begin(s.account, address);
    status(said);
    nav.toFiles();
  };

  let wallet: HTMLElement | undefined;
  if (!info.did) {
    wallet = h(
      "section",
      { id: "wallet" },
      h("h2", {}, "Link a wallet"),
      h(
        "p",
        {},
        "Files, storage space and directory entries belong to a wallet: its address becomes this account's identity. Your wallet signs one message naming this account (no transaction, no fee); after that, signing in by email or with the wallet opens this same account.",
      ),
      provider()
        ? h(
            "button",
            {
              id: "link-wallet",
              onclick: action(async () => {
                status("Waiting for the wallet: sign the message that links it to this account…");
                const address = await linkWallet(s.account);
                await walletReady(address, `Linked wallet ${address} to this account`);
              }),
            },
            "Link a wallet",
          )
        : noWalletHelp(),
    );
  } else if (!s.did) {
    // Linked, but this session began by email: only the wallet's signature acts for its DID.
    wallet = h(
      "section",
      { id: "wallet" },
      h("h2", {}, "Use your wallet in this tab"),
      h("p", {}, "This account's wallet is ", h("code", {}, info.address), ". Files, storage space and the directory need its signature: sign in with it here (no transaction, no fee)."),
      provider()
        ? h(
            "button",
            {
              id: "wallet-signin",
              onclick: action(async () => {
                status("Waiting for the wallet…");
                const address = await signInWithWallet(s.account);
                await walletReady(address, `Signed in with wallet ${address}`);
              }),
            },
            "Sign in with the wallet",
          )
        : noWalletHelp(),
    );
  }

  show(
    h("h1", {}, "Account"),
    h("section", { id: "user-info" }, h("dl", {}, ...rows.flatMap(([field, label, v]) => [h("dt", {}, label), h("dd", { "data-field": field }, v)]))),
    wallet ?? h("span", { hidden: true }),
    h(
      "section",
      { id: "records" },
      h("h2", {}, "Points"),
      h("p", { class: "muted" }, "This gateway gives points to accounts that say, now and then, that they are still in use."),
      h(
        "ul",
        { class: "items" },
        ACTIONS.map(({ id, label, button, done, once }, i) => {
          const r = records[i];
          return h(
            "li",
            {},
            h("span", { class: "name" }, label),
            r ? h("span", { class: "muted" }, `Done ${when(r.time)}: ${r.points} points`) : h("span", { class: "muted" }, "Not done yet"),
            // A once-only action that is done has nothing left to press.
            !(once && r) &&
              h(
                "div",
                { class: "actions" },
                h(
                  "button",
                  {
                    class: "secondary",
                    "data-action": `record-${id}`,
                    onclick: action(async () => {
                      await s.account.addRecord(id);
                      status(done);
                      await accountPage(s, nav);
                    }),
                  },
                  button,
                ),
              ),
          );
        }),
      ),
    ),
    h("button", { class: "danger", id: "sign-out", onclick: action(nav.signOut) }, "Sign out"),
  );
}
