/**
 * Sign-in: with the injected wallet (SIWE), by email code, or by email and password. A browser
 * without a wallet is told how to get one (or to use the command line) instead of being sent to a
 * button that cannot work, and the email tab shows what the gateway said about the code it sent
 * (a gateway without mail says where it wrote it).
 */
import { action, field, h, show, status } from "../dom.ts";
import { noWalletHelp } from "../guidance.ts";
import { begin, newAccountClient } from "../session.ts";
import { provider, signInWithWallet } from "../wallet.ts";

type Method = "wallet" | "code" | "password";

export function signInPage(done: () => void, method: Method = provider() ? "wallet" : "code") {
  const account = newAccountClient();
  const tab = (m: Method, label: string) =>
    h("button", { type: "button", role: "tab", "aria-selected": String(m === method), onclick: () => signInPage(done, m) }, label);

  const wallet = provider()
    ? h(
        "div",
        {},
        h("p", {}, "Your wallet signs a sign-in message: no transaction, no fee. Before your first upload it asks once more, to let this page sign uploads for a few hours."),
        h(
          "button",
          {
            id: "wallet-signin",
            onclick: action(async () => {
              status("Waiting for the wallet…");
              const address = await signInWithWallet(account);
              await begin(account, address);
              status(`Signed in as ${address}`);
              done();
            }),
          },
          "Sign in with wallet",
        ),
      )
    : h("div", {}, noWalletHelp(), h("p", { class: "muted" }, "You can also sign in by email now, and link a wallet to your account later."));

  const sent = h("p", { id: "code-sent", class: "note", hidden: true });
  const codeForm = h(
    "form",
    {
      id: "code-form",
      onsubmit: action(async () => {
        const email = field(codeForm, "email");
        const code = field(codeForm, "code");
        if (!code) {
          // The gateway's own words: on a gateway without mail, where the code was written.
          sent.textContent = (await account.sendEmailCode(email)) || "A code was sent: check your mailbox";
          sent.hidden = false;
          status("Code sent");
          (codeForm.elements.namedItem("code") as HTMLInputElement).focus();
          return;
        }
        await account.loginWithEmailCode(email, code);
        await begin(account);
        status(`Signed in as ${email}`);
        done();
      }),
    },
    h("label", {}, "Email", h("input", { type: "email", name: "email", required: true, autocomplete: "email" })),
    h("label", {}, "Code from the mail (leave empty to get one)", h("input", { type: "text", name: "code", inputmode: "numeric", autocomplete: "one-time-code", pattern: "[0-9]{6}" })),
    h("button", { type: "submit" }, "Continue"),
    sent,
  );

  const passwordForm = h(
    "form",
    {
      id: "password-form",
      onsubmit: action(async () => {
        const email = field(passwordForm, "email");
        await account.loginWithPassword(email, field(passwordForm, "password"));
        await begin(account);
        status(`Signed in as ${email}`);
        done();
      }),
    },
    h("label", {}, "Email", h("input", { type: "email", name: "email", required: true, autocomplete: "email" })),
    h("label", {}, "Password", h("input", { type: "password", name: "password", required: true, autocomplete: "current-password", minlength: 8 })),
    h("button", { type: "submit" }, "Sign in"),
  );

  const panel = { wallet, code: codeForm, password: passwordForm }[method];
  show(
    h("h1", {}, "Sign in"),
    h("div", { class: "tabs", role: "tablist" }, tab("wallet", "Wallet"), tab("code", "Email code"), tab("password", "Password")),
    h("section", {}, panel),
    h(
      "p",
      { class: "muted" },
      "Files, storage space and the directory belong to a wallet. An account made by email starts without one: link your wallet to it on the Account page, once, and then either way of signing in opens the same account.",
    ),
  );
}
