/**
 * What a design or issue citation looks like in text a user reads: "D20", "(D9's scrub)", "spec
 * rule 4", "spec 2.6", "row 7 of the spec", "issue N", "action 6". Users have neither the design
 * notes nor the issue tracker, so such text tells them nothing; source comments may cite them.
 * Narrow enough to pass what users do meet: Cids (lower-case base32), hex, "SHA-256", "EIP-712",
 * "/64", "AES-256".
 */

/** A design decision's number: upper-case D (a "d5" in hex or a Cid is not one). */
const DESIGN = /\bD\d{1,2}\b/;
/** The specification's rules, rows and sections, the issue tracker, the points actions' ids. */
const OTHERS = /\bspec(?:ification)?\s+(?:rules?\s+|rows?\s+|section\s+|§\s*)?\d|\b(?:rules?|rows?)\s+\d+\s+of\s+(?:the\s+)?spec|\bissue\s+#?\d+|\baction\s+\d\b/i;

/** The citation in `text`, or undefined. */
export function citationIn(text: string): string | undefined {
  return (DESIGN.exec(text) ?? OTHERS.exec(text))?.[0];
}

/** `where: "citation" in text` for each text that cites one, to show in a failed expectation. */
export function citing(texts: Iterable<readonly [where: string, text: string]>): string[] {
  const found: string[] = [];
  for (const [where, text] of texts) {
    const hit = citationIn(text);
    if (hit) found.push(`${where}: "${hit}" in ${JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text)}`);
  }
  return found;
}
