/**
 * Bun macro: the SHA-256 of the anvil executable that `anvil-binary.ts` embeds, computed at bundle
 * time from the same package file. A start then compares the copy in the data dir with this
 * constant and never reads the embedded 44 MiB: reading it touched every page of it inside the
 * compiled binary's mapping, ≈ 42 MiB of idle RSS that stayed, and hashed it (≈ 30 ms).
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

export function embeddedAnvilSha256(): string {
  return createHash("sha256").update(readFileSync(Bun.resolveSync("@foundry-rs/anvil-linux-amd64/bin/anvil", import.meta.dir))).digest("hex");
}
