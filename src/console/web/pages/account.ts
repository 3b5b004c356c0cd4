/** The account: who is signed in (spec 2.11, 2.12), points and action records (2.13). */
import { action, h, show, status, when } from "../dom.ts";
import type { Session } from "../session.ts";

const ACTIONS: [number, string][] = [
  [5, "First liveness-check subscription"],
  [6, "Renewal"],
];

export async function accountPage(s: Session, signOut: () => Promise<void>) {
  const [me, info, ...records] = await Promise.all([s.account.me(), s.account.userInfo(), ...ACTIONS.map(([id]) => s.account.getRecord(id))]);
  const rows: [string, string][] = [
    ["User", me.uid],
    ["Role", me.role],
    ["Name", info.name || "—"],
    ["Email", info.email ?? me.email ?? "—"],
    ["Address", info.address || "—"],
    ["DID", info.did || "none (account pages only)"],
    ["Points", String(info.points)],
  ];
  show(
    h("h1", {}, "Account"),
    h("section", { id: "user-info" }, h("dl", {}, ...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-field": k }, v)]))),
    h(
      "section",
      { id: "records" },
      h("h2", {}, "Points"),
      h(
        "ul",
        { class: "items" },
        ACTIONS.map(([id, label], i) => {
          const r = records[i];
          return h(
            "li",
            {},
            h("span", { class: "name" }, `${id} · ${label}`),
            r ? h("span", { class: "muted" }, `${r.points} points, ${when(r.time)}`) : h("span", { class: "muted" }, "not done"),
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
                    status(`Recorded action ${id}`);
                    await accountPage(s, signOut);
                  }),
                },
                "Record",
              ),
            ),
          );
        }),
      ),
    ),
    h("button", { class: "danger", id: "sign-out", onclick: action(signOut) }, "Sign out"),
  );
}
