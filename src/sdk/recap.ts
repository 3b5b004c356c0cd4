/**
 * ERC-5573 ReCaps: the capabilities a Sign-In with Ethereum message delegates, as its last
 * resource (`urn:recap:` + unpadded base64url of a JSON details object) and, in words, at the end
 * of its statement. Wallets show the statement; services read the details object and check that
 * the statement says the same (the ERC's verification step), so what the user read is what was
 * granted. Used by the session grants (grants.ts builds them, the gateway reads them): one
 * encoder, one decoder, one translation, here.
 *
 * The decoder is strict, as a verifier should be: keys must be URIs and ability strings of the
 * ERC's grammar, every object's keys in the ERC's order, each ability's qualifications an array
 * of objects; anything else is a RecapError saying what.
 *
 * @example
 *   const uri = encodeRecap({ "did:ethr:0x3d9:0xAb…": { "stowage/upload": [{}] } })
 *   const statement = `Let this page sign for me. ${recapStatement(decodeRecap(uri).att)}`
 */
import { base64urlnopad } from "@scure/base";

/** Qualifications of one ability: `[{}]` is "without restriction", `[]` "no valid use". */
export type RecapCaveats = Record<string, unknown>[];
/** Resource URI → ability string (`namespace/name`) → its qualifications. */
export type RecapAttenuations = Record<string, Record<string, RecapCaveats>>;

export interface RecapDetails {
  att: RecapAttenuations;
  /** Cids of parent capabilities; absent when the SIWE address controls the resources itself. */
  prf?: string[];
}

export const RECAP_PREFIX = "urn:recap:";
export const RECAP_PREAMBLE = "I further authorize the stated URI to perform the following actions on my behalf:";

const ABILITY = /^[a-zA-Z0-9.*_+-]+\/[a-zA-Z0-9.*_+-]+$/;
const RESOURCE = /^[a-zA-Z][a-zA-Z0-9+.-]*:\S*$/;
/** A details object past this is not one a wallet could show anyone. */
const MAX_DETAILS = 4096;

export class RecapError extends Error {
  override name = "RecapError";
}

/** The ERC's order (JavaScript's default sort): by UTF-16 code unit, a prefix first. */
const sorted = (keys: string[]) => [...keys].sort();
const inOrder = (keys: string[]) => keys.every((k, i) => i === 0 || (keys[i - 1] as string) < k);

function check(details: RecapDetails): RecapDetails {
  const { att, prf } = details as { att?: unknown; prf?: unknown };
  if (typeof att !== "object" || att === null || Array.isArray(att)) throw new RecapError("a ReCap's att must be an object of resources");
  const resources = Object.keys(att);
  if (!resources.length) throw new RecapError("a ReCap's att names no resource");
  if (!inOrder(resources)) throw new RecapError("a ReCap's resources must be in lexicographic order");
  for (const resource of resources) {
    if (!RESOURCE.test(resource)) throw new RecapError(`${JSON.stringify(resource.slice(0, 80))} is not a resource URI`);
    const abilities = (att as Record<string, unknown>)[resource];
    if (typeof abilities !== "object" || abilities === null || Array.isArray(abilities)) throw new RecapError(`the abilities for ${resource} must be an object`);
    const names = Object.keys(abilities);
    if (!names.length) throw new RecapError(`no ability is named for ${resource}`);
    if (!inOrder(names)) throw new RecapError(`the abilities for ${resource} must be in lexicographic order`);
    for (const name of names) {
      if (!ABILITY.test(name)) throw new RecapError(`${JSON.stringify(name.slice(0, 80))} is not an ability string (namespace/name)`);
      const caveats = (abilities as Record<string, unknown>)[name];
      if (!Array.isArray(caveats) || caveats.some((c) => typeof c !== "object" || c === null || Array.isArray(c))) throw new RecapError(`the qualifications of ${name} must be an array of objects`);
    }
  }
  if (prf !== undefined && (!Array.isArray(prf) || !prf.length || prf.some((p) => typeof p !== "string"))) throw new RecapError("a ReCap's prf must be a non-empty array of Cids");
  return details;
}

/** The `urn:recap:` URI of `att` (keys put in the ERC's order). */
export function encodeRecap(att: RecapAttenuations, prf?: string[]): string {
  const ordered: RecapAttenuations = {};
  for (const resource of sorted(Object.keys(att))) {
    const abilities = att[resource] as Record<string, RecapCaveats>;
    ordered[resource] = Object.fromEntries(sorted(Object.keys(abilities)).map((name) => [name, abilities[name] as RecapCaveats]));
  }
  const details = check({ att: ordered, ...(prf ? { prf } : {}) });
  return RECAP_PREFIX + base64urlnopad.encode(new TextEncoder().encode(JSON.stringify(details)));
}

/** The details object of a `urn:recap:` URI; a RecapError when it is not a valid one. */
export function decodeRecap(uri: string): RecapDetails {
  if (!uri.startsWith(RECAP_PREFIX)) throw new RecapError("not a urn:recap: URI");
  const encoded = uri.slice(RECAP_PREFIX.length);
  if (encoded.length > (MAX_DETAILS * 4) / 3 + 4) throw new RecapError("the ReCap is too large");
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(base64urlnopad.decode(encoded)));
  } catch {
    throw new RecapError("the ReCap is not unpadded base64url of a JSON object");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new RecapError("the ReCap is not a JSON object");
  const extra = Object.keys(parsed).filter((k) => k !== "att" && k !== "prf");
  if (extra.length) throw new RecapError(`the ReCap has fields the ERC does not define: ${extra.join(", ")}`);
  return check(parsed as RecapDetails);
}

/**
 * The ERC's ReCap Translation Algorithm: what a ReCap statement must end with. Each resource's
 * abilities are grouped by namespace, each group one numbered sentence:
 * `(1) 'stowage': 'delete', 'upload' for 'did:ethr:…'.`
 */
export function recapStatement(att: RecapAttenuations): string {
  const parts: string[] = [RECAP_PREAMBLE];
  let n = 1;
  for (const [resource, abilities] of Object.entries(att)) {
    const byNamespace = new Map<string, string[]>();
    for (const ability of Object.keys(abilities)) {
      const [namespace, name] = ability.split("/") as [string, string];
      byNamespace.set(namespace, [...(byNamespace.get(namespace) ?? []), name]);
    }
    for (const [namespace, names] of byNamespace) parts.push(`(${n++}) '${namespace}': ${names.map((name) => `'${name}'`).join(", ")} for '${resource}'.`);
  }
  return parts.join(" ");
}
