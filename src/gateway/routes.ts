/**
 * The trustless gateway's HTTP side (D17): the storage routes' `GET|HEAD /ipfs/<cid>` hands a
 * request here first; what names a raw block or a CAR (Accept or `?format=`) is answered by the
 * gateway service, anything else is left to the download (spec row 5) by answering undefined.
 * The Request is read here and nowhere below.
 */
import { clientIp } from "../http/client-ip.ts";
import type { Gateway, TrustlessAnswer } from "./service.ts";

function toResponse(answer: TrustlessAnswer): Response {
  return new Response(answer.body ?? null, { status: answer.status, headers: answer.headers });
}

/** The gateway's answer, or undefined when the request is no trustless one (a download). */
export function trustlessAnswer(gateway: Gateway | undefined, request: Request, type: string, cid: string, query: Record<string, string | undefined>): Promise<Response> | undefined {
  if (!gateway || type !== "ipfs") return undefined;
  const want = gateway.wants(request.headers.get("accept"), query);
  if (!want) return undefined;
  return gateway
    .serve({ cid, want, head: request.method === "HEAD", client: clientIp(request), ifNoneMatch: request.headers.get("if-none-match"), query })
    .then(toResponse);
}
