/**
 * What the console tells someone whose browser has no wallet: files, space and the directory
 * belong to a wallet's identity, so without one the storage pages cannot work here. Rather than
 * an error, it says how to get one, and that the command line does everything with a key of its
 * own and no browser wallet at all.
 */
import { h } from "./dom.ts";

export function noWalletHelp(): HTMLElement {
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
        "Or use Stowage's command line, which needs no browser wallet: ",
        h("code", {}, "./stowage keygen"),
        " makes a key, ",
        h("code", {}, "./stowage put FILE"),
        " uploads a file, and ",
        h("code", {}, "./stowage --help"),
        " lists the rest (run them in the Stowage folder).",
      ),
    ),
  );
}
