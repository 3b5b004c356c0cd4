/**
 * The user commands of `stowage`, for someone using a gateway from a shell: login, put, get, link,
 * ls, rm, quota, deposit, withdraw, buy, publish, unpublish, buy-read, search, keys, age-key, grant,
 * revoke, keygen and whoami. Thin wrappers over the SDK (src/sdk/); each run
 * logs in afresh, so nothing is kept between commands but the key the user keeps.
 *
 * @example
 *   export STOWAGE_USER_KEY=0x…  STOWAGE_GATEWAY=https://gw.example
 *   stowage put photo.jpg --to ipfs
 *   stowage get bafy… --out photo.jpg
 */
import type { Env } from "../../config.ts";
import { buy, buyRead, deposit, login, ls, publish, quota, rm, search, unpublish, withdraw } from "./commands.ts";
import { commonHelp, defaultIo, explain, parseInvocation, shortHelp, type Invocation, type Io, type Spec } from "./common.ts";
import { get, put } from "./transfer.ts";
import { DEFAULT_LINK_LIFE, link } from "./link.ts";
import { ageKey, grant, revoke } from "./encryption.ts";
import { keys } from "./keys.ts";
import { keygen, whoami } from "./identity.ts";

export interface UserCommand {
  summary: string;
  help: () => string;
  run: (args: string[]) => Promise<number>;
}

interface Definition {
  summary: string;
  usage: string;
  text: string;
  spec: Spec;
  /** Search and keygen need no key; the others say so in their help. */
  needsKey?: false;
  run: (inv: Invocation, io: Io) => Promise<number>;
}

const definitions: Record<string, Definition> = {
  login: {
    summary: "Check your key and the gateway: prints your DID and the gateway's chain",
    usage: "stowage login [--json]",
    text: `Logs in to the gateway with your key (EIP-712) and prints your DID, the gateway's chain, its
seller address and your account's balance (for deposits and gas). Nothing is saved: every command
logs in by itself, so this only checks that the key and the gateway work.

  --json   print it as JSON`,
    spec: { switches: ["--json"] },
    run: login,
  },
  put: {
    summary: "Upload a file, stdin or a folder (streamed) to dfs or ipfs",
    usage: "stowage put FILE|DIR|- [--to dfs|ipfs] [--name NAME] [--encrypt | --plain] [--car] [--json | --quiet] [--progress]",
    text: `Uploads FILE, streamed: it is read once to hash it (the hash is signed) and once to send it.
A file of the same name on that back-end is replaced. It uses storage space and traffic (see
\`stowage quota\`). Prints "ID <id>  Cid <cid>  <size>  <back-end>  <name>".
  -                reads stdin (kept in a private temporary file while it is sent); needs --name
  DIR              uploads every file under DIR, each named by its path from DIR's parent
                   ("photos/2024/a.jpg"; the gateway stores the last part, so two files of one
                   name in different folders are refused first), one line each and a summary on
                   stderr. It stops at the first failure and says which file; the ones before it
                   stay stored.

  --to dfs|ipfs    the back-end (default dfs). ipfs content is readable by anyone on the IPFS
                   network who knows its Cid: encrypt what is private.
  --name NAME      the name to store it under (default: FILE's base name; for DIR: the top folder's)
  --encrypt        encrypt it first, on this computer, to your account's age key (see
                   \`stowage age-key\`): the gateway and the network see ciphertext only, and
                   \`stowage get\` decrypts it. STOWAGE_ENCRYPT=on makes this the default.
  --plain          do not encrypt, even with STOWAGE_ENCRYPT=on
  --car            FILE is a CAR (from ipfs-car, Kubo's \`ipfs dag export\`, …): import it into ipfs.
                   Every block is checked against its Cid; each root (a UnixFS file or folder)
                   becomes a file with that Cid, named NAME (default FILE's name less .car) when
                   there is one root, by its Cid when there are several. All or nothing: a bad
                   or missing block, or too little space, keeps nothing. One line per root.
  --json           print the stored entry as JSON instead (for DIR or --car: a list of them)
  --quiet          print only the Cid (for CID=$(stowage put …); for DIR: one a line)
  --progress       show progress on stderr even when it is not a terminal`,
    spec: { flags: ["--to", "--name"], switches: ["--json", "--quiet", "--progress", "--encrypt", "--plain", "--car"] },
    run: put,
  },
  get: {
    summary: "Download a file by Cid, to a file or stdout (streamed), whole or a byte range",
    usage: "stowage get CID [--from dfs|ipfs] [--out PATH] [--range A-B] [--raw] [--progress]",
    text: `Downloads the file with this Cid (yours, or one the directory lets you read), streamed to
stdout or to PATH. It uses traffic (see \`stowage quota\`). An encrypted file (age) is decrypted
on the way: yours with your key, another's with the share its owner gave you (\`stowage grant\`).

  --from dfs|ipfs  the back-end (default: where you store it, dfs first; else the first of dfs and
                   ipfs that lets you read it, and the error names both when neither does)
  --out PATH       write to PATH instead of stdout ("-" is stdout). A file appears only once every
                   byte came; a directory receives the file under its stored name.
  --range A-B      only bytes A to B, both included, counted from 0; A- reads from A to the end
                   (of an encrypted file: with --raw only)
  --raw            do not decrypt: the bytes as stored (for \`age -d -i\`)
  --progress       show progress on stderr even when it is not a terminal`,
    spec: { flags: ["--from", "--out", "--range"], switches: ["--progress", "--raw"] },
    run: get,
  },
  link: {
    summary: "Print a link anyone can open (a browser, curl) to read one file once, on your traffic",
    usage: "stowage link CID [--from dfs|ipfs] [--expires WHEN] [--json]",
    text: `Prints a URL that reads the file with this Cid (yours, or one the directory lets you read) once,
paid from your traffic, until it expires: \`curl -OJ URL\` saves it under its stored name. The URL
holds a voucher signed with your key for this one file: it reads no other file of yours, and the
gateway refuses it once it was used or has expired. Whoever has the URL can use it, so share it
as you would a password. Making it spends nothing (a HEAD checks that you may read the file).

  --from dfs|ipfs  the back-end (default: where you store it, dfs first; else the first of dfs and
                   ipfs that lets you read it)
  --expires WHEN   when it stops working: a duration from now (30m, 12h, 7d, 2w), unix seconds, or
                   0 for no expiry (it then works until it is used); default ${DEFAULT_LINK_LIFE}
  --json           print {url, cid, backend, bytes, expires, payer} (expires: unix seconds, 0 for none)`,
    spec: { flags: ["--from", "--expires"], switches: ["--json"] },
    run: link,
  },
  ls: {
    summary: "List your files on dfs or ipfs",
    usage: "stowage ls [--from dfs|ipfs] [--json]",
    text: `Lists your files on one back-end: ID, size, name, Cid and when it was stored (UTC).

  --from dfs|ipfs  the back-end (default dfs)
  --json           print the entries as JSON (exact sizes, Public, UserDefined)`,
    spec: { flags: ["--from"], switches: ["--json"] },
    run: ls,
  },
  rm: {
    summary: "Delete one of your dfs files by its ID",
    usage: "stowage rm ID [--json]",
    text: `Deletes your dfs file with this ID (see \`stowage ls\`); its space is given back. Files on ipfs
cannot be deleted: an ID that \`stowage ls --from ipfs\` shows is refused.

  --json   print {removed: ID}`,
    spec: { switches: ["--json"] },
    run: rm,
  },
  quota: {
    summary: "Show your storage space, traffic and deposit",
    usage: "stowage quota [--json]",
    text: `Shows what is left of your storage space and traffic (shared by dfs and ipfs), the free part
granted, when each expires, and your deposit (what \`stowage buy\` pays from).

  --json   print both records as JSON, as the gateway answers them (SizeByte, FreeByte, Expire, Balance in gwei, Nonce)`,
    spec: { switches: ["--json"] },
    run: quota,
  },
  deposit: {
    summary: "Deposit currency into the gateway's contract, to buy space and traffic with",
    usage: "stowage deposit AMOUNT_ETH [--json]",
    text: `Sends AMOUNT_ETH (such as 0.01) from your account into the gateway's Proxy contract, through
the gateway's public RPC, signed with your key. Prints the transaction hash once it is mined.
Your account needs that much currency plus gas.

  --json   print {tx, depositedWei, depositWei} (depositWei: the deposit now)`,
    spec: { switches: ["--json"] },
    run: deposit,
  },
  withdraw: {
    summary: "Take currency back out of your deposit, to your account",
    usage: "stowage withdraw AMOUNT_ETH [--json]",
    text: `Withdraws AMOUNT_ETH (such as 0.01) of your deposit in the gateway's Proxy contract back to your
account (a contract call signed with your key; you pay its gas). Prints the transaction hash once
it is mined. More than the deposit holds is refused and nothing moves. Space and traffic already
bought stay yours.

  --json   print {tx, withdrawnWei, depositWei} (depositWei: what is left)`,
    spec: { switches: ["--json"] },
    run: withdraw,
  },
  buy: {
    summary: "Buy storage space or traffic (or both) with your deposit",
    usage: "stowage buy [--space BYTES] [--traffic BYTES] [--json]",
    text: `Buys storage space, traffic or both, paid from your deposit at the contract's unit prices.
BYTES takes units (512MiB, 10GiB). Prints each purchase's transaction hash; a deposit too small
is refused (402; for both: when it cannot pay both) and nothing is bought.

  --space BYTES     bytes of storage space
  --traffic BYTES   bytes of traffic (uploads and downloads)
  --json            print the purchases as JSON (kind, size, costWei, tx, the record after it)`,
    spec: { flags: ["--space", "--traffic"], switches: ["--json"] },
    run: buy,
  },
  publish: {
    summary: "Publish one of your files in the gateway's directory",
    usage: "stowage publish CID [--name NAME] [--price GWEI] [--public] [--keyword K …] [--wait] [--json]",
    text: `Publishes a file you store at this gateway in the directory (a Directory contract call signed
with your key), so others can find it with \`stowage search\` and read it: free with --public,
else by paying its price to you. Prints the transaction hash.

  --name NAME     the name to list it under (default: its stored name; at most 256 bytes)
  --price GWEI    what reading it costs, in gwei (default 0: only those you grant can read it)
  --public        free for anyone to read
  --keyword K     a search keyword (repeat it, up to 16, each at most 64 bytes)
  --wait          return only once the gateway's search shows it (it indexes the chain's events
                  on its next poll; without --wait a search right after may miss it)
  --json          print the entry published, with its transaction, as JSON`,
    spec: { flags: ["--name", "--price"], switches: ["--public", "--wait", "--json"], repeated: ["--keyword"] },
    run: publish,
  },
  unpublish: {
    summary: "Remove one of your entries from the directory",
    usage: "stowage unpublish MID [--json]",
    text: `Removes your directory entry MID (its Cid) with a Directory contract call signed with your key:
its grants and purchases go with it, and the gateway's search drops it after its next poll. The
file stays stored (\`stowage rm\` deletes it). Prints the transaction hash.

  --json   print {tx, mid}`,
    spec: { switches: ["--json"] },
    run: unpublish,
  },
  "buy-read": {
    summary: "Buy read permission on someone's published file, paying its price to them",
    usage: "stowage buy-read OWNER MID [--max-price GWEI] [--json]",
    text: `Buys read permission on OWNER's directory entry MID (both as \`stowage search\` shows them),
paying its price from your account (not your deposit) to OWNER, plus gas. Once the gateway has
seen the purchase (its next poll of the chain), \`stowage get MID\` reads it. An encrypted file is
bought only when the gateway holds its key to share with you. Prints the transaction hash.

  --max-price GWEI   refuse to pay more than this (the owner may change the price)
  --json             print {tx, owner, mid, priceGwei}`,
    spec: { flags: ["--max-price"], switches: ["--json"] },
    run: buyRead,
  },
  "age-key": {
    summary: "Print your account's age secret key (for age -d -i), or its public recipient",
    usage: "stowage age-key [--recipient] [--publish] [--json]",
    text: `Prints the age identity your encrypted files are sealed to (AGE-SECRET-KEY-1…), made at your
first encrypted upload and kept at the gateway wrapped under a key only your wallet can derive.
With it, Debian's \`age -d -i key.txt\` opens any of your files downloaded with \`stowage get --raw\`,
even without Stowage. Keep it as secret as your wallet key.

  --recipient   print the public recipient (age1…) instead
  --publish     publish the recipient on your DID (needed once before others can share with you;
                an encrypted upload does it too), and print the recipient, not the secret key
                (a contract call: your account pays its gas)
  --json        print { did, recipient, identity (unless --recipient or --publish), publishedTx }
                as JSON`,
    spec: { switches: ["--recipient", "--publish", "--json"] },
    run: ageKey,
  },
  grant: {
    summary: "Let an address read one of your files: on-chain grant, plus the key share if encrypted",
    usage: "stowage grant MID ADDRESS [--json]",
    text: `Grants ADDRESS read permission on your directory entry MID (its Cid; publish it first) with a
Directory contract call. When the file is encrypted, also stores a share at the gateway: its file
key wrapped to ADDRESS's published age recipient, so \`stowage get\` decrypts it for them. Prints
the grant's transaction hash.

  --json   print { mid, reader, tx, sharedTo } as JSON (sharedTo: the recipient, or null when plain)`,
    spec: { switches: ["--json"] },
    run: grant,
  },
  revoke: {
    summary: "Withdraw a grant and its key share",
    usage: "stowage revoke MID ADDRESS [--rekey] [--json]",
    text: `Removes ADDRESS's key share of MID and revokes its on-chain read grant. Future access only:
what they already downloaded and decrypted, they keep. Prints the transaction hash.

  --rekey   also re-encrypt the file under a new key (a new Cid, same name: the old copy is
            replaced) and move its directory entry there, so a file key they kept opens nothing
            stored now. Prints the new Cid; other readers must be granted again.
  --json    print { mid, reader, tx, unshared, rekeyedTo } as JSON (rekeyedTo: the new Cid, or
            null without --rekey)`,
    spec: { switches: ["--rekey", "--json"] },
    run: revoke,
  },
  search: {
    summary: "Search the gateway's directory of published files",
    usage: "stowage search QUERY [--page N] [--size N] [--json]",
    text: `Searches the names and keywords of published files stored at this gateway (prefixes match,
case and accents do not matter), best match first. Needs no key.

  --page N   the page, from 1 (default 1)
  --size N   results per page (default 20, at most 100)
  --json     print the results as JSON (with Owner and Mid, the Cid)`,
    spec: { flags: ["--page", "--size"], switches: ["--json"] },
    needsKey: false,
    run: search,
  },
  keygen: {
    summary: "Make a new private key (offline): prints it, or writes it to a file only you can read",
    usage: "stowage keygen [--out PATH] [--json]",
    text: `Makes a new random private key for the user commands and prints it on stdout (its address on
stderr), so \`export STOWAGE_USER_KEY=$(stowage keygen)\` sets it. With --out, writes it to a new
file of mode 600 for --key-file instead and prints the address. The key is your account: keep it
secret. Asks no gateway.

  --out PATH   write the key to PATH (a new file) instead of printing it
  --json       print {key, address} (with --out: {keyFile, address})`,
    spec: { flags: ["--out"], switches: ["--json"] },
    needsKey: false,
    run: keygen,
  },
  whoami: {
    summary: "Print your key's address (offline), to give to whoever sends you currency",
    usage: "stowage whoami [--json]",
    text: `Prints the address of your key (STOWAGE_USER_KEY or --key-file): your DID is did:ethr:<chain>:<address>
(\`stowage login\` shows it as the gateway sees it). Asks no gateway.

  --json   print it as JSON`,
    spec: { switches: ["--json"] },
    run: whoami,
  },
  keys: {
    summary: "Access keys for S3 tools and pinning tokens for `ipfs pin remote`: create, list, revoke",
    usage: "stowage keys create [--scope s3|pins] [--access rw|ro] [--bucket dfs|ipfs|*] [--expires WHEN] [--json]\n       stowage keys list [--json]\n       stowage keys revoke ID [--json]",
    text: `Access keys let S3 tools use your files through the gateway's S3 API: the buckets are the
back-ends, dfs and ipfs. A key is minted by a request signed with your key, and works while that
key may sign for your DID (revoking a delegate key ends the access keys it made).

  create           mint a key and print its access key id and secret. The secret is shown this
                   once: keep it now.
    --scope s3|pins      s3 (default): an S3 access key; pins: a token for the Pinning Service
                         API at <gateway>/psa (\`ipfs pin remote service add stowage URL TOKEN\`),
                         printed as \`token\` with --json
    --access rw|ro       read and write (default), or read only
    --bucket dfs|ipfs|*  the bucket it may use (default *: both)
    --expires WHEN       0 for never (default), unix seconds, or a duration from now: 12h, 90d, 2w
  list             your keys (never their secrets): id, scope (s3 or pins), access (rw, ro; -
                   for a pins token), bucket, expiry, creation, signer. --json prints the
                   gateway's list, whose scope is rw, ro or pins
  revoke ID        end a key at once (ID: its access key id, or its id from --json)
  --json           print the answer as JSON`,
    spec: { flags: ["--scope", "--access", "--bucket", "--expires"], switches: ["--json"] },
    run: keys,
  },
};

const helpOf = (d: Definition) => {
  const short = shortHelp(d.spec);
  return `Usage: ${d.usage}\n\n${d.text}\n${short ? `\n${short}` : ""}\n${commonHelp(d.needsKey !== false)}`;
};

/** The command table entries for src/main.ts. Failures come out as ConfigError (exit 2) or
 * CliError (exit 1), with the gateway's or the chain's own words. */
export function userCommands(env: Env, io: Io = defaultIo()): Record<string, UserCommand> {
  return Object.fromEntries(
    Object.entries(definitions).map(([name, d]) => [
      name,
      {
        summary: d.summary,
        help: () => helpOf(d),
        run: async (args: string[]) => {
          const inv = parseInvocation(args, d.spec, env);
          try {
            return await d.run(inv, io);
          } catch (err) {
            throw explain(err, inv.gateway);
          }
        },
      },
    ]),
  );
}
