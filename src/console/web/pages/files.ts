/**
 * Files on both back-ends: upload (with a progress bar) to dfs, ipfs or both, encrypted or not
 * (D20: sealed in the page to the account's age identity), download (opened in the page when the
 * entry is encrypted), delete (dfs only: spec 4.1 rule 4), copy the Cid, and publish in the directory.
 */
import type { FileEntry, StorageClient } from "../../../sdk/storage.ts";
import { action, bytes, h, show, status, when } from "../dom.ts";
import type { Session } from "../session.ts";
import { encryptionOf, grantStorage } from "../wallet.ts";

const KINDS = ["dfs", "ipfs"] as const;
type Kind = (typeof KINDS)[number];

export async function filesPage(s: Session, go: (hash: string) => void) {
  if (!s.storage) return;
  const store: StorageClient = s.storage;
  const granted = s.grantedUntil !== undefined;
  const grant = h(
    "section",
    { id: "grant" },
    granted
      ? h("p", { class: "muted" }, "Session key ", h("code", {}, s.sessionKey?.address ?? ""), ` signs for you until ${when(s.grantedUntil ?? 0)}.`)
      : [
          h(
            "p",
            {},
            "Uploads and deletes are signed. Your wallet signs one sign-in message now, letting a key this page holds sign uploads, deletes and traffic vouchers for a few hours, and then nothing per file.",
          ),
          h(
            "button",
            {
              id: "grant-button",
              onclick: action(async () => {
                status("Waiting for the wallet: sign the session key's grant…");
                await grantStorage(s);
                status("Storage session started");
                await filesPage(s, go);
              }),
            },
            "Start storage session",
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
    h("div", { class: "checks" }, ...KINDS.map((k) => h("label", { class: "check" }, h("input", { type: "checkbox", name: k, checked: true }), ` ${k}`))),
    h(
      "label",
      { class: "check wide" },
      h("input", { type: "checkbox", name: "encrypt", id: "upload-encrypt" }),
      " Encrypt in this page (age): only your wallet's key, and those you share it with, can open it",
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
              status("Cid copied");
            }),
          },
          "Copy Cid",
        ),
        h("button", { class: "secondary", "data-action": "publish", onclick: () => go(`#/directory?cid=${encodeURIComponent(f.Cid)}&name=${encodeURIComponent(f.Name)}&size=${f.Size}`) }, "Publish"),
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

  show(
    h("h1", {}, "Files"),
    grant,
    h("section", {}, h("h2", {}, "Upload"), upload),
    ...KINDS.map((k) => h("section", {}, h("h2", {}, k === "dfs" ? "dfs (distributed storage)" : "ipfs"), listed[k])),
  );
  await lists();
}
