/**
 * The continuation tokens the S3 API issues (ListObjectsV2, ListBuckets). Opaque to clients, as
 * S3's are, and recognisable here: a token this gateway never issued is refused with
 * InvalidArgument, as S3 refuses one, rather than taken for a name to start after (a client
 * that sent a mangled token would otherwise get a listing that silently skips or repeats). A
 * token is the name its listing stopped at, tagged with the listing it came from and
 * base64url-encoded. It carries no secret: one made by hand from a name lists nothing that
 * `start-after` with that name would not.
 */
import { s3Error } from "./errors.ts";

export type TokenOf = "objects" | "buckets";

const tag = (of: TokenOf) => `stowage:${of}:`;
const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The token that resumes a listing of `of` after `last`. */
export function issueToken(of: TokenOf, last: string): string {
  return Buffer.from(tag(of) + last, "utf8").toString("base64url");
}

/** The name a token issued by `issueToken(of, …)` resumes after; InvalidArgument for any other. */
export function readToken(of: TokenOf, token: string): string {
  if (/^[A-Za-z0-9_-]+$/.test(token)) {
    const bytes = Buffer.from(token, "base64url");
    // Node's decoder skips what is not base64url: only a token that encodes back the same is ours.
    if (bytes.toString("base64url") === token) {
      let text: string | undefined;
      try {
        text = utf8.decode(bytes);
      } catch {
        text = undefined;
      }
      if (text?.startsWith(tag(of))) return text.slice(tag(of).length);
    }
  }
  throw s3Error("InvalidArgument", "The continuation token provided is incorrect", { ArgumentName: "continuation-token", ArgumentValue: token.slice(0, 256) });
}
