/**
 * What the console tells someone whose browser has no wallet: files, space and the directory
 * belong to a wallet's identity, so without one the storage pages cannot work here. Rather than
 * an error, it says how to get one, and that the command line does everything with a key of its
 * own and no browser wallet at all: the lines to paste, pointed at this gateway (the command
 * line's default is a gateway on localhost, which this page may not be).
 */
import { h } from "./dom.ts";

export function noWalletHelp(): HTMLElement {
  const lines = [`export STOWAGE_GATEWAY=${location.origin}`, "export STOWAGE_USER_KEY=$(./stowage keygen)", "./stowage put FILE"];
  return h(
    "div",
    { id: "no-wallet", class: "note" },
    h("p", {}, h("strong", {}, "No wallet in this browser. "), "Your files, storage space and directory entries belong to an Ethereum wallet: it signs for you, and its address is your identity here."),
    h(
      "ul",
      {},
      h("li", {}, "Install a wallet extension that supports Ethereum (MetaMask, Rabby, Frame or another), make or import an account in it, then reload this page."),
      h(
        "li",
        {},
        "Or use Stowage's command line, which needs no browser wallet. In the Stowage folder, these lines make a key (keep it secret: it is your account) and upload a file to this gateway:",
        h("pre", { id: "no-wallet-cli" }, lines.join("\n")),
        "The key needs storage space before its first upload (",
        h("code", {}, "./stowage deposit"),
        " and ",
        h("code", {}, "./stowage buy"),
        "); ",
        h("code", {}, "./stowage --help"),
        " lists every command.",
      ),
    ),
  );
}
