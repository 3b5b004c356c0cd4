/**
 * The denylist's one failure: content this gateway blocks. A domain failure (src/failure.ts, code
 * `blocked`) thrown inside (downloads, gateways, the write path's refusal), mapped at each API's
 * edge by its code: 410 in the storage API's JSON (http/errors.ts) and in the S3 API's XML
 * (s3api/errors.ts). It carries the Cid for the log and the refusal's wording.
 */
import { Failure } from "../failure.ts";

/** What was asked for is on a denylist (a file's, or the operator's own). */
export class ContentBlocked extends Failure {
  override name = "ContentBlocked";
  constructor(
    /** The CID asked for, as the request named it. */
    readonly cid: string,
    /** For an upload: the content is refused rather than gone. */
    readonly upload = false,
  ) {
    super("blocked", upload ? `This content is blocked on this gateway: it cannot be stored here (${cid})` : `This content is blocked on this gateway (${cid})`);
  }
}

export const isContentBlocked = (err: unknown): err is ContentBlocked => err instanceof ContentBlocked;
