/**
 * Session keys (D19): the grants the wallet signed for console pages (this one, other tabs,
 * other devices), with what each may sign and the site that asked, each until its time or until
 * revoked here. Revoking takes effect at once at the
 * gateway: that key's signatures are refused from the next request. Revoking this page's own key
 * ends its storage session; the files page then offers to start a new one.
 */
import type { SessionGrant } from "../../../sdk/grants.ts";
import { action, h, show, status, when } from "../dom.ts";
import type { Session } from "../session.ts";

/** What each ability lets a page do, in words. */
const ABILITY: Record<string, string> = { upload: "upload", delete: "delete", voucher: "download (spend your traffic)" };

export async function sessionsPage(s: Session) {
  if (!s.grants) return;
  const grants = s.grants;
  const mine = s.sessionKey?.address.toLowerCase();
  const live = await grants.list();

  const row = (g: SessionGrant) => {
    const here = g.key.toLowerCase() === mine;
    return h(
      "li",
      { "data-key": g.key, "data-here": here ? "yes" : undefined },
      h("span", { class: "name" }, here ? "This page" : "Another page or device"),
      h("code", {}, g.key),
      h("span", { class: "muted", "data-field": "abilities" }, `May ${g.abilities.map((a) => ABILITY[a] ?? a).join(", ")} · until ${when(g.validUntil)}`),
      h("span", { class: "muted" }, `Granted ${when(g.createdAt)} to ${g.origin} by `, h("code", {}, g.signer)),
      h(
        "div",
        { class: "actions" },
        h(
          "button",
          {
            class: "danger",
            "data-action": "revoke",
            onclick: action(async () => {
              await grants.revoke(g.key);
              if (here) s.grantedUntil = undefined;
              status(here ? "Revoked this page's session key: start a new storage session to upload" : `Revoked ${g.key}`);
              await sessionsPage(s);
            }),
          },
          "Revoke",
        ),
      ),
    );
  };

  show(
    h("h1", {}, "Pages allowed to sign for you"),
    h(
      "p",
      { class: "muted" },
      "Console pages (this one, other tabs, other devices) your wallet let sign uploads, deletes and downloads for you, each with a key of its own. None can sign in, buy, make access keys or open your encryption key. Each stops at its time, or now if you revoke it.",
    ),
    h("section", {}, h("ul", { class: "items", id: "grants" }, ...(live.length ? live.map(row) : [h("li", { class: "muted" }, "No live session keys")]))),
  );
}
