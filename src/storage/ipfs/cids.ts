/** Cid strings in and out of the back-end: parsed once, stored as CIDv1 base32. */
import { CID } from "multiformats/cid";
import { IpfsError } from "./errors.ts";

export function parseCid(text: string): CID {
  try {
    return CID.parse(text).toV1();
  } catch (err) {
    throw new IpfsError("IPFS_BAD_CID", `not a Cid: ${JSON.stringify(text.slice(0, 100))}`, { cause: err });
  }
}

/** The canonical text form (CIDv1, base32), as `ipfs_pins` keys it. */
export function cidKey(cid: CID): string {
  return cid.toV1().toString();
}

/** The canonical text form, or undefined for a string that is no Cid. */
export function tryCidKey(text: string): string | undefined {
  try {
    return cidKey(parseCid(text));
  } catch {
    return undefined;
  }
}
