/**
 * Signer recovery in-process: what signerOfDigest pays per signature — keccak of the
 * key and the checksummed address included — on the system's libsecp256k1 (secp256k1-native.ts)
 * against @noble's pure JS, CPU µs per recovery, in alternation. Every signed request, login,
 * grant and voucher pays it once; a small upload twice. Needs the library (`sh scripts/secp256k1.sh install`).
 *
 * Run: bun bench/recovery.ts [--rounds 5] [--recoveries 2000]   (--help: every option)
 */
import { bytesToHex, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { nativeRecovery, nobleRecoverKey, type RecoverKey } from "../src/identity/secp256k1-native.ts";
import { signerBy } from "../src/identity/signer.ts";
import { benchArgs, compare, intOption, loadAverage, usageError } from "./harness.ts";

const values = benchArgs("Signer recovery in-process: libsecp256k1 through Bun's FFI against @noble, CPU µs per recovery.", {
  rounds: { default: "5", help: "measured rounds" },
  recoveries: { default: "2000", help: "recoveries per measurement (@noble's side runs a tenth as many: it is ≈ 10× slower)" },
});
const rounds = intOption(values, "rounds");
const recoveries = intOption(values, "recoveries", 10);
const native = nativeRecovery();
if (!native) usageError("libsecp256k1 does not load here (or disagrees with @noble): sh scripts/secp256k1.sh install");

// 200 keys and digests, signed before the clock: the measurement is recovery alone.
const signed: { digest: Uint8Array; signature: Hex; address: string }[] = [];
for (let i = 0; i < 200; i++) {
  const account = privateKeyToAccount(generatePrivateKey());
  const digest = crypto.getRandomValues(new Uint8Array(32));
  signed.push({ digest, signature: await account.sign({ hash: bytesToHex(digest) }), address: account.address });
}

/** CPU µs per recovery of `n` recoveries on `recoverKey`, each checked (a wrong answer stops the bench). */
function measure(recoverKey: RecoverKey, n: number): number {
  const signer = signerBy(recoverKey);
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const s = signed[i % signed.length]!;
    if (signer(s.digest, s.signature) !== s.address) throw new Error("a recovery gave another address");
  }
  const used = process.cpuUsage(start);
  return (used.user + used.system) / n;
}

console.log(`load average at the start: ${loadAverage()}`);
await compare({
  name: "signer recovery",
  unit: "µs",
  higherIsBetter: false,
  label: "CPU per recovery",
  rounds,
  labels: { subject: "libsecp256k1", baseline: "@noble" },
  subject: async () => measure(native as RecoverKey, recoveries),
  baseline: async () => measure(nobleRecoverKey, Math.max(1, Math.floor(recoveries / 10))),
});
console.log(`load average at the end: ${loadAverage()}`);
