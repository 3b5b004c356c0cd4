/**
 * Files on both back-ends: upload (with a progress bar) to dfs, ipfs or both, encrypted or not
 * (D20: sealed in the page to the account's age identity), download (opened in the page when the
 * entry is encrypted), delete (dfs only: spec 4.1 rule 4), copy the Cid, and publish in the directory.
 * Defaults are the command line's (`stowage put`: dfs, not encrypted), and each store says in
 * plain words what it is; an account with no space left is told where to get some.
 */
import type { FileEntry, QuotaRecord, StorageClient } from "../../../sdk/storage.ts";
import { action, bytes, h, show, status, when } from "../dom.ts";
import type { Session } from "../session.ts";
import { encryptionOf, grantStorage } from "../wallet.ts";

const KINDS = ["dfs", "ipfs"] as const;
type Kind = (typeof KINDS)[number];

/** What each store is, for someone who has never heard of either. */
const STORES: Record<Kind, { title: string; choice: string }> = {
  dfs: { title: "dfs: this gateway's own store", choice: "dfs: stored by this gateway; you can delete it" },
  ipfs: { title: "ipfs: the gateway's IPFS node", choice: "ipfs: also reachable by its Cid over IPFS; it cannot be deleted" },
};

export async function filesPage(s: Session, go: (hash: string) => void) {
  if (!s.storage) return;
  const store: StorageClient = s.storage;
  const granted = s.grantedUntil !== undefined;
  const grant = h(
    "section",
    { id: "grant" },
    granted
      ? h("p", { class: "muted" }, "This page's key ", h("code", {}, s.sessionKey?.address ?? ""), ` signs for you until ${when(s.grantedUntil ?? 0)}.`)
      : [
          h(
            "p",
            {},
            "Uploads, downloads and deletes are signed. Your wallet signs one message now (no transaction, no fee) that lets this page sign them for you for a few hours; then it asks nothing per file.",
          ),
          h(
            "button",
            {
              id: "grant-button",
              onclick: action(async () => {
                status("Waiting for the wallet: sign the message that lets this page upload…");
                await grantStorage(s);
                status("This page may upload, download and delete for you now");
                await filesPage(s, go);
              }),
            },
            "Allow this page to upload",
          ),
        ],
  );

  const progress = h("progress", { id: "upload-progress", max: 100, value: 0, hidden: true });
  const progressText = h("span", { id: "upload-progress-text", class: "muted" });
  const upload = h(
    "form",
    {
      id: "upload-form",
      onsubmit: action(async () => {
        const input = upload.elements.namedItem("file") as HTMLInputElement;
        const file = input.files?.[0];
        if (!file) throw new Error("choose a file first");
        const kinds = KINDS.filter((k) => (upload.elements.namedItem(k) as HTMLInputElement).checked);
        if (!kinds.length) throw new Error("choose dfs, ipfs or both");
        const encrypt = (upload.elements.namedItem("encrypt") as HTMLInputElement).checked;
        if (encrypt) status("Encryption key: the wallet signs to open it (twice the first time)…");
        const enc = encrypt ? await encryptionOf(s) : undefined;
        progress.hidden = false;
        for (const kind of kinds) {
          progress.value = 0;
          if (enc) progressText.textContent = `${kind}: encrypting ${file.name}…`;
          const o = {
            name: file.name,
            onProgress: (sent: number, total: number) => {
              progress.value = Math.floor((sent / total) * 100);
              progressText.textContent = `${kind}: ${bytes(sent)} of ${bytes(total)}`;
            },
          };
          const entry = enc ? await enc.upload(kind, file, o) : await store.upload(kind, file, o);
          progressText.textContent = `${kind}: stored ${entry.Name} (${bytes(entry.Size)}${enc ? ", encrypted" : ""})`;
        }
        status(`Uploaded ${file.name} to ${kinds.join(" and ")}${encrypt ? ", encrypted" : ""}`);
        await lists();
      }),
    },
    h("label", {}, "File", h("input", { type: "file", name: "file", required: true })),
    // The command line's default (`stowage put` stores on dfs); ipfs is a choice.
    h("div", { class: "checks" }, ...KINDS.map((k) => h("label", { class: "check wide" }, h("input", { type: "checkbox", name: k, checked: k === "dfs" }), ` ${STORES[k].choice}`))),
    h(
      "label",
      { class: "check wide" },
      h("input", { type: "checkbox", name: "encrypt", id: "upload-encrypt" }),
      " Encrypt it in this page first: only your wallet, and those you share it with, can open it",
    ),
    h("button", { type: "submit", disabled: !granted }, "Upload"),
    progress,
    progressText,
  );

  const listed = Object.fromEntries(KINDS.map((k) => [k, h("ul", { class: "items", id: `files-${k}` })])) as Record<Kind, HTMLUListElement>;

  function row(kind: Kind, f: FileEntry) {
    // D20's marker; the encryption module itself loads only when a file is sealed or opened.
    const encrypted = f.UserDefined.encryption === "age";
    return h(
      "li",
      { "data-cid": f.Cid, "data-name": f.Name, "data-size": f.Size, "data-encrypted": encrypted ? "age" : undefined },
      h("span", { class: "name" }, f.Name),
      h("span", { class: "muted" }, `${bytes(f.Size)} · ${new Date(f.ModTime).toLocaleString()}${f.Public ? " · public" : ""}${encrypted ? " · encrypted" : ""}`),
      h("code", {}, f.Cid),
      h(
        "div",
        { class: "actions" },
        h(
          "button",
          {
            class: "secondary",
            "data-action": "download",
            disabled: !granted,
            onclick: action(async () => {
              status(`Downloading ${f.Name}…`);
              const res = await store.download(kind, f.Cid, { size: f.Size });
              // An encrypted entry is opened here, streamed through the age decryption.
              const blob = encrypted ? await new Response((await (await encryptionOf(s)).open(res, f.Cid)).body).blob() : await res.blob();
              const url = URL.createObjectURL(blob);
              h("a", { href: url, download: f.Name }).click();
              setTimeout(() => URL.revokeObjectURL(url), 60_000);
              status(`Downloaded ${f.Name}${encrypted ? ", decrypted" : ""}`);
            }),
          },
          "Download",
        ),
        h(
          "button",
          {
            class: "secondary",
            "data-action": "copy",
            onclick: action(async () => {
              await navigator.clipboard.writeText(f.Cid).catch(() => {
                throw new Error(`copy it by hand: ${f.Cid}`);
              });
              status("Cid (the file's content address) copied");
            }),
          },
          "Copy Cid",
        ),
        h("button", { class: "secondary", "data-action": "publish", onclick: () => go(`#/directory?cid=${encodeURIComponent(f.Cid)}&kind=${kind}`) }, "Publish"),
        kind === "dfs" &&
          h(
            "button",
            {
              class: "danger",
              "data-action": "delete",
              disabled: !granted,
              onclick: action(async () => {
                await store.delete(f.ID, "dfs");
                status(`Deleted ${f.Name}`);
                await lists();
              }),
            },
            "Delete",
          ),
      ),
    );
  }

  async function lists() {
    await Promise.all(
      KINDS.map(async (kind) => {
        const { Object: files } = await store.list(kind);
        listed[kind].replaceChildren(...(files.length ? files.map((f) => row(kind, f)) : [h("li", { class: "muted" }, "No files yet")]));
      }),
    );
  }

  // No space, no upload: say so before the first one fails.
  const space = h("p", { id: "no-space", class: "note", hidden: true }, "You have no storage space yet: deposit and buy some on the ", h("a", { href: "#/quota" }, "Quota"), " page first.");
  const showSpace = (r: QuotaRecord) => {
    space.hidden = r.SizeByte > 0;
  };

  show(
    h("h1", {}, "Files"),
    grant,
    h("section", {}, h("h2", {}, "Upload"), space, upload),
    ...KINDS.map((k) => h("section", {}, h("h2", {}, STORES[k].title), listed[k])),
  );
  await Promise.all([lists(), store.space().then(showSpace)]);
}
