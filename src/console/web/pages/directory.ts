/**
 * The directory (D10): search published files (GET /challenge) and publish one of yours (a
 * Directory contract call the wallet sends; the gateway's index follows within a poll).
 *
 * Publishing picks one of the files the account stores here (the directory opens only a copy its
 * owner stores at this gateway), so its Cid and size come from the listing, never typed. Who may
 * read it is said in words, and the default is the command line's (`stowage publish`): only those
 * the owner grants. An encrypted file that is sold has its key escrowed to the gateway first, as
 * the command line does, or no buyer could open it.
 */
import type { SearchResult } from "../../../sdk/directory.ts";
import type { FileEntry } from "../../../sdk/storage.ts";
import { action, bytes, field, h, show, status } from "../dom.ts";
import type { Session } from "../session.ts";
import { chainOf, encryptionOf } from "../wallet.ts";

type Kind = "dfs" | "ipfs";
type Access = "private" | "sold" | "public";

const ACCESS: [Access, string][] = [
  ["private", "Only people you grant it to (private)"],
  ["sold", "Anyone who pays your price"],
  ["public", "Anyone, for free (public)"],
];

export async function directoryPage(s: Session, params: URLSearchParams) {
  const store = s.storage;
  if (!store) return;
  const [{ directory }, ...listed] = await Promise.all([chainOf(s), store.list("ipfs"), store.list("dfs")]);
  // A file stored on both back-ends is one Cid: listed once, from ipfs first.
  const files = new Map<string, { kind: Kind; file: FileEntry }>();
  for (const [i, kind] of (["ipfs", "dfs"] as const).entries()) for (const file of listed[i]?.Object ?? []) if (!files.has(file.Cid)) files.set(file.Cid, { kind, file });
  const results = h("ul", { class: "items", id: "search-results" });

  const hit = (r: SearchResult) =>
    h(
      "li",
      { "data-mid": r.Mid },
      h("span", { class: "name" }, r.Name),
      h("span", { class: "muted" }, `${bytes(r.Size)} · ${r.Public ? "free for anyone" : `${r.Price} gwei to read`}${r.keywords.length ? ` · ${r.keywords.join(", ")}` : ""}`),
      h("code", {}, r.Mid),
      h("span", { class: "muted mono" }, `published by ${r.Owner}`),
    );

  const search = h(
    "form",
    {
      id: "search-form",
      role: "search",
      onsubmit: action(async () => {
        const found = await directory.search(field(search, "query"));
        results.replaceChildren(...(found.length ? found.map(hit) : [h("li", { class: "muted" }, "Nothing found (a new entry shows up once the gateway has read it from the chain, within seconds)")]));
        status(`${found.length} found`);
      }),
    },
    h("label", {}, "Name or keyword", h("input", { type: "search", name: "query", required: true })),
    h("button", { type: "submit" }, "Search"),
  );

  const wanted = params.get("cid");
  const choice = h(
    "select",
    { name: "file", required: true },
    ...[...files.values()].map(({ kind, file }) =>
      h(
        "option",
        { value: file.Cid, selected: file.Cid === wanted, "data-kind": kind },
        `${file.Name} (${bytes(file.Size)}${file.UserDefined.encryption === "age" ? ", encrypted" : ""})`,
      ),
    ),
  );
  const name = h("input", { type: "text", name: "name", required: true, maxlength: 256 });
  const chosen = () => files.get(choice.value);
  const fillName = () => {
    name.value = chosen()?.file.Name ?? "";
  };
  choice.addEventListener("change", fillName);
  fillName();
  const access = h("select", { name: "access" }, ...ACCESS.map(([value, label]) => h("option", { value }, label)));
  const price = h("input", { type: "number", name: "price", min: "1", value: "1000" });
  const priceLabel = h("label", { hidden: true }, "Price to read it (gwei, paid to you)", price);
  access.addEventListener("change", () => {
    priceLabel.hidden = access.value !== "sold";
    price.required = access.value === "sold";
  });

  const publish = h(
    "form",
    {
      id: "publish-form",
      onsubmit: action(async () => {
        const picked = chosen();
        if (!picked) throw new Error("choose one of your files");
        const { kind, file } = picked;
        const how = access.value as Access;
        const cost = how === "sold" ? BigInt(field(publish, "price") || "0") : 0n;
        if (how === "sold" && cost <= 0n) throw new Error("a price to read it must be at least 1 gwei");
        const keywords = field(publish, "keywords").split(",").map((k) => k.trim()).filter(Boolean);
        if (file.UserDefined.encryption === "age" && cost > 0n) {
          // Sold encrypted: the gateway needs the file's key to hand it to each buyer.
          status("Handing the file's key to the gateway, which gives it to buyers…");
          await (await encryptionOf(s)).escrow(file.Cid, kind);
        }
        status("Waiting for the wallet to send the entry…");
        const tx = await directory.publish({ cid: file.Cid, name: field(publish, "name"), size: file.Size, price: cost, isPublic: how === "public", keywords });
        status(`Published ${file.Name} (${tx}); searches show it once the gateway has read it from the chain`);
      }),
    },
    h("label", {}, "Your file", choice),
    h("label", {}, "Name others see", name),
    h("label", {}, "Keywords to find it by (comma-separated)", h("input", { type: "text", name: "keywords" })),
    h("label", {}, "Who may read it", access),
    priceLabel,
    h("button", { type: "submit" }, "Publish"),
  );

  show(
    h("h1", {}, "Directory"),
    h("section", {}, h("h2", {}, "Search"), search, results),
    h(
      "section",
      {},
      h("h2", {}, "Publish a file of yours"),
      files.size ? publish : h("p", { class: "muted", id: "nothing-to-publish" }, "You have no files here yet: upload one on the ", h("a", { href: "#/files" }, "Files"), " page, then publish it."),
    ),
  );
}
