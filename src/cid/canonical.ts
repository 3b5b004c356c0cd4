/**
 * The one spelling of a Cid that vouchers sign and the gateway compares (D22): CIDv1 in base32,
 * as back-ends answer it. A CIDv0 (`Qm…`) or another base names the same content, so a client and
 * the gateway that each canonicalise agree on the bytes a voucher's `cid` field hashes.
 *
 * @example
 *   canonicalCid("QmPZ9gcCEpqKTo6aq61g2nXGUhM4iCL3ewB6LDXZCtioEB") // "bafybeiasb5vpmaounyilfuxbd3lryvosl4yefqrfahsb2esg46q6tu6y5q"
 */
import { CID } from "multiformats/cid";

/** `text` as a CIDv1 in base32; throws when it is not a Cid. */
export const canonicalCid = (text: string): string => CID.parse(text).toV1().toString();
