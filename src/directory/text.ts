/**
 * Text as the FTS5 index sees it, on both sides: what is indexed and what is searched for.
 * (PostgreSQL folds the same way in SQL, migrations-pg/0001_directory_search.sql; its query is
 * built from the same `queryWords`, in search-pg.ts.)
 *
 * The tokenizer (unicode61, remove_diacritics 2) folds case and accents; NFKC beforehand also
 * folds compatibility forms (full-width letters, ligatures), so "ｃａｆé" finds "Cafe".
 * A search never hands user input to FTS5's query syntax: it is split into words here, each word
 * becomes a quoted prefix phrase (`"word"*`), and the phrases are OR-ed, so bm25 ranks entries
 * matching more of the words first. Words hold only letters, digits and marks, so no quote,
 * star, parenthesis, column filter or operator (NEAR, AND, OR, NOT, `-`, `^`) survives.
 */
import { CID } from "multiformats/cid";

export const normalize = (s: string) => s.normalize("NFKC");

/** The text indexed for an entry's keywords: one string, words separated by spaces. */
export const keywordText = (keywords: readonly string[]) => normalize(keywords.join(" "));

/** Words beyond this are ignored: a bounded query keeps a search's cost bounded. */
export const MAX_QUERY_WORDS = 16;
const MAX_WORD_CHARS = 64;
const WORD = /[\p{L}\p{N}\p{M}\p{Co}]+/gu;
const HAS_LETTER_OR_DIGIT = /[\p{L}\p{N}]/u;

/** A user's query as searchable words (letters, digits and marks only), at most MAX_QUERY_WORDS. */
export function queryWords(query: string): string[] {
  const words = [...new Set((normalize(query).match(WORD) ?? []).filter((w) => HAS_LETTER_OR_DIGIT.test(w)).map((w) => w.slice(0, MAX_WORD_CHARS)))];
  return words.slice(0, MAX_QUERY_WORDS);
}

/** An FTS5 MATCH expression for a user's query; undefined when it holds no searchable word. */
export function matchExpression(query: string): string | undefined {
  const words = queryWords(query);
  if (words.length === 0) return undefined;
  return words.map((w) => `"${w}"*`).join(" OR ");
}

/** A Mid as the storage tables write Cids (CIDv1, base32), or null when it is no Cid. */
export function canonicalCid(mid: string): string | null {
  try {
    return CID.parse(mid).toV1().toString();
  } catch {
    return null;
  }
}
