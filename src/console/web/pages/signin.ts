/** Sign-in: by email code, by email and password, or with the injected wallet (SIWE). */
import { action, field, h, show, status } from "../dom.ts";
import { begin, newAccountClient } from "../session.ts";
import { provider, signInWithWallet } from "../wallet.ts";

type Method = "wallet" | "code" | "password";

export function signInPage(done: () => void, method: Method = provider() ? "wallet" : "code") {
  const account = newAccountClient();
  const tab = (m: Method, label: string) =>
    h("button", { type: "button", role: "tab", "aria-selected": String(m === method), onclick: () => signInPage(done, m) }, label);

  const wallet = h(
    "div",
    {},
    h("p", {}, "Your wallet signs a sign-in message (no transaction, no gas). Storage then asks it once more to start a session."),
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
  );

  const codeForm = h(
    "form",
    {
      id: "code-form",
      onsubmit: action(async () => {
        const email = field(codeForm, "email");
        const code = field(codeForm, "code");
        if (!code) {
          status(await account.sendEmailCode(email) || "Code sent: check your mailbox");
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
    h("label", {}, "Code (leave empty to get one)", h("input", { type: "text", name: "code", inputmode: "numeric", autocomplete: "one-time-code", pattern: "[0-9]{6}" })),
    h("button", { type: "submit" }, "Continue"),
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
    h("p", { class: "muted" }, "Email accounts have no DID: they see their account and points. Files, quota and the directory need a wallet."),
  );
}
