/**
 * Quota (D7, D8): the space and traffic records, the deposit (a transaction the wallet sends),
 * and purchases paid from the deposit (Bearer calls: no wallet prompt). Each number says what it
 * is for; the records' purchase counter (`Nonce`) is the gateway's bookkeeping, not shown.
 */
import { formatEther, formatGwei, parseEther, parseGwei } from "viem";
import type { QuotaRecord } from "../../../sdk/storage.ts";
import { action, bytes, field, h, show, status, when } from "../dom.ts";
import type { Session } from "../session.ts";
import { chainOf } from "../wallet.ts";

const MIB = 1024 * 1024;

function record(title: string, id: string, what: string, r: QuotaRecord) {
  return h(
    "section",
    { id },
    h("h2", {}, title),
    h("p", { class: "muted" }, what),
    h(
      "dl",
      {},
      h("dt", {}, "Left"),
      h("dd", { "data-field": "SizeByte" }, bytes(r.SizeByte)),
      h("dt", {}, "Of it, given free"),
      h("dd", {}, bytes(r.FreeByte)),
      h("dt", {}, "Good until"),
      h("dd", {}, when(r.Expire)),
    ),
  );
}

export async function quotaPage(s: Session) {
  const store = s.storage;
  if (!store) return;
  const [space, traffic, chain] = await Promise.all([store.space(), store.traffic(), chainOf(s)]);
  const prices = await chain.gateway.prices();
  const cost = (mib: number, perByte: bigint) => `${formatEther(BigInt(Math.round(mib * MIB)) * perByte)} ETH`;

  const deposit = h(
    "form",
    {
      id: "deposit-form",
      onsubmit: action(async () => {
        const eth = field(deposit, "eth");
        status("Waiting for the wallet to send the deposit…");
        const tx = await chain.gateway.deposit(parseEther(eth));
        status(`Deposited ${eth} ETH (${tx})`);
        await quotaPage(s);
      }),
    },
    h("label", {}, "Amount to deposit (ETH)", h("input", { type: "text", name: "eth", inputmode: "decimal", required: true, value: "1", pattern: "[0-9]+(\\.[0-9]+)?" })),
    h("button", { type: "submit" }, "Deposit"),
  );

  const buy = (what: "space" | "traffic", perByte: bigint, preset: number) => {
    const form: HTMLFormElement = h(
      "form",
      {
        id: `buy-${what}-form`,
        onsubmit: action(async () => {
          const mib = Number(field(form, "mib"));
          if (!(mib > 0)) throw new Error("size must be a positive number of MiB");
          const size = Math.round(mib * MIB);
          status(`Buying ${bytes(size)} of ${what}…`);
          const { tx } = what === "space" ? await store.buySpace({ size }) : await store.buyTraffic({ size });
          status(`Bought ${bytes(size)} of ${what} (${tx})`);
          await quotaPage(s);
        }),
      },
      h("label", {}, `Buy ${what} (MiB) at ${formatGwei(perByte)} gwei a byte`, h("input", { type: "number", name: "mib", min: "1", step: "1", value: String(preset), required: true })),
      h("button", { type: "submit" }, `Buy ${what}`),
      h("span", { class: "muted" }, `${preset} MiB costs ${cost(preset, perByte)}`),
    );
    return form;
  };

  show(
    h("h1", {}, "Storage space and traffic"),
    h(
      "section",
      { id: "balance" },
      h("h2", {}, "Deposit"),
      h(
        "p",
        { class: "muted" },
        "Space and traffic are bought from a deposit your wallet makes into the gateway's contract (one transaction). What you do not spend stays yours: the command line's ",
        h("code", {}, "stowage withdraw"),
        " takes it back.",
      ),
      h("p", {}, "Deposit left: ", h("strong", { "data-field": "Balance" }, `${formatEther(parseGwei(String(space.Balance)))} ETH`)),
      deposit,
    ),
    record("Space", "space", "How much your files may take, on dfs and ipfs together.", space),
    record("Traffic", "traffic", "How much you may download: each download counts against it.", traffic),
    h("section", {}, h("h2", {}, "Buy"), buy("space", prices.space, 64), buy("traffic", prices.traffic, 256)),
  );
}
