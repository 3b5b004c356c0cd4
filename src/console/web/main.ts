/**
 * The console's entry: a hash router over the pages. A session that acts for no DID (an email,
 * password or messenger sign-in) gets the account page only, which links a wallet or signs in with
 * the linked one; the storage pages need the DID a wallet's signature gives.
 */
import { h, message, show, status } from "./dom.ts";
import { accountPage } from "./pages/account.ts";
import { directoryPage } from "./pages/directory.ts";
import { filesPage } from "./pages/files.ts";
import { quotaPage } from "./pages/quota.ts";
import { sessionsPage } from "./pages/sessions.ts";
import { signInPage } from "./pages/signin.ts";
import { end, resume, session } from "./session.ts";

const go = (hash: string) => {
  if (location.hash === hash) void route();
  else location.hash = hash;
};

function navFor(hasDid: boolean, page: string) {
  const nav = document.getElementById("nav") as HTMLElement;
  nav.hidden = false;
  for (const a of nav.querySelectorAll("a")) {
    a.hidden = a.hasAttribute("data-needs-did") && !hasDid;
    if (a.getAttribute("href") === `#/${page}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

async function route() {
  const s = session();
  const [path = "", query = ""] = location.hash.replace(/^#\/?/, "").split("?");
  if (!s) {
    (document.getElementById("nav") as HTMLElement).hidden = true;
    signInPage(() => go(session()?.did ? "#/files" : "#/account"));
    return;
  }
  const page = s.did ? path || "files" : "account";
  navFor(Boolean(s.did), page);
  document.body.dataset.page = page;
  try {
    if (page === "files") await filesPage(s, go);
    else if (page === "quota") await quotaPage(s);
    else if (page === "directory") await directoryPage(s, new URLSearchParams(query));
    else if (page === "sessions") await sessionsPage(s);
    else
      await accountPage(s, {
        signOut: async () => {
          await end();
          status("Signed out");
          go("#/");
        },
        toFiles: () => go("#/files"),
      });
  } catch (err) {
    show(h("h1", {}, "Something went wrong"), h("p", {}, message(err)));
    status(message(err), true);
  } finally {
    document.body.dataset.ready = page;
  }
}

addEventListener("hashchange", () => void route());
void (async () => {
  await resume();
  await route();
})();
