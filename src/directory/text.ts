/**
 * Text as the FTS5 index sees it, on both sides: what is indexed and what is searched for.
 * (PostgreSQL folds the same way in SQL, migrations-pg/0001_directory_search.sql; its query is
 * built from the same `queryWords`, in search-pg.ts.)
 *
 * The tokenizer (unicode61, remove_diacritics 2) folds case and accents; NFKC beforehand also
 * folds compatibility forms (full-width letters, ligatures), so "ｃａｆé" finds "Cafe".
 * A search never hands user input to FTS5's query syntax: it is split into words here, each word
 * becomes a quoted phrase, and the phrases are OR-ed, so bm25 ranks entries matching more of the
 * words first. Only the last word is a prefix (`"word"*`, the word being typed); the earlier ones
 * are whole words (D16): a prefix merges the lists of every word it begins, which for a short or
 * common word over a million entries is hundreds of thousands of rows. Words hold
 * only letters, digits and marks, so no quote, star, parenthesis, column filter or operator
 * (NEAR, AND, OR, NOT, `-`, `^`) survives.
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

/** A word of a query, and whether it is matched as a prefix (only the last word typed is). */
export interface QueryTerm {
  word: string;
  prefix: boolean;
}

/** A user's query as searchable words (letters, digits and marks only), each once, at most
 * MAX_QUERY_WORDS of them; the last word typed is kept, and is the prefix. */
export function queryTerms(query: string): QueryTerm[] {
  const typed = (normalize(query).match(WORD) ?? []).filter((w) => HAS_LETTER_OR_DIGIT.test(w)).map((w) => w.slice(0, MAX_WORD_CHARS));
  const last = typed.at(-1);
  if (last === undefined) return [];
  const earlier = [...new Set(typed.slice(0, -1))].filter((w) => w !== last).slice(0, MAX_QUERY_WORDS - 1);
  return [...earlier.map((word) => ({ word, prefix: false })), { word: last, prefix: true }];
}

/** FTS5 MATCH expressions for a user's query (undefined when it holds no searchable word):
 * `any` matches names and keywords, `name` names only, `keywordOnly` keywords but not names.
 * With `wholeLast`, the last word too is a whole word (a common word, search-sqlite.ts). */
export function matchExpressions(query: string, wholeLast = false): { any: string; name: string; keywordOnly: string } | undefined {
  const terms = queryTerms(query);
  if (terms.length === 0) return undefined;
  const any = terms.map((t) => `"${t.word}"${t.prefix && !wholeLast ? "*" : ""}`).join(" OR ");
  return { any, name: `{name} : (${any})`, keywordOnly: `{keywords} : (${any}) NOT {name} : (${any})` };
}

/** A Mid as the storage tables write Cids (CIDv1, base32), or null when it is no Cid. */
export function canonicalCid(mid: string): string | null {
  try {
    return CID.parse(mid).toV1().toString();
  } catch {
    return null;
  }
}
