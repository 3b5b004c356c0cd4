/**
 * The directory (D10): search published files (GET /challenge) and publish one of yours (a
 * Directory contract call the wallet sends; the gateway's index follows within a poll).
 */
import type { SearchResult } from "../../../sdk/directory.ts";
import { action, bytes, field, h, show, status } from "../dom.ts";
import type { Session } from "../session.ts";
import { chainOf } from "../wallet.ts";

export async function directoryPage(s: Session, params: URLSearchParams) {
  const { directory } = await chainOf(s);
  const results = h("ul", { class: "items", id: "search-results" });

  const hit = (r: SearchResult) =>
    h(
      "li",
      { "data-mid": r.Mid },
      h("span", { class: "name" }, r.Name),
      h("span", { class: "muted" }, `${bytes(r.Size)} · ${r.Public ? "public" : `${r.Price} gwei`}${r.keywords.length ? ` · ${r.keywords.join(", ")}` : ""}`),
      h("code", {}, r.Mid),
      h("span", { class: "muted mono" }, `owner ${r.Owner}`),
    );

  const search = h(
    "form",
    {
      id: "search-form",
      role: "search",
      onsubmit: action(async () => {
        const found = await directory.search(field(search, "query"));
        results.replaceChildren(...(found.length ? found.map(hit) : [h("li", { class: "muted" }, "Nothing found (new entries appear within a poll of the chain)")]));
        status(`${found.length} found`);
      }),
    },
    h("label", {}, "Name or keyword", h("input", { type: "search", name: "query", required: true })),
    h("button", { type: "submit" }, "Search"),
  );

  const publish = h(
    "form",
    {
      id: "publish-form",
      onsubmit: action(async () => {
        const cid = field(publish, "cid");
        const keywords = field(publish, "keywords").split(",").map((k) => k.trim()).filter(Boolean);
        const isPublic = (publish.elements.namedItem("public") as HTMLInputElement).checked;
        status("Waiting for the wallet to send the entry…");
        const tx = await directory.publish({ cid, name: field(publish, "name"), size: Number(field(publish, "size")), price: BigInt(field(publish, "price") || "0"), isPublic, keywords });
        status(`Published (${tx}); it is searchable once the gateway has indexed it`);
      }),
    },
    h("label", {}, "Cid", h("input", { type: "text", name: "cid", required: true, value: params.get("cid") ?? "" })),
    h("label", {}, "Name", h("input", { type: "text", name: "name", required: true, maxlength: 256, value: params.get("name") ?? "" })),
    h("label", {}, "Size (bytes)", h("input", { type: "number", name: "size", min: "0", required: true, value: params.get("size") ?? "" })),
    h("label", {}, "Keywords (comma-separated)", h("input", { type: "text", name: "keywords" })),
    h("label", {}, "Price (gwei)", h("input", { type: "number", name: "price", min: "0", value: "0" })),
    h("label", { class: "check" }, h("input", { type: "checkbox", name: "public", checked: true }), " public"),
    h("button", { type: "submit" }, "Publish"),
  );

  show(h("h1", {}, "Directory"), h("section", {}, h("h2", {}, "Search"), search, results), h("section", {}, h("h2", {}, "Publish a file of yours"), publish));
}
