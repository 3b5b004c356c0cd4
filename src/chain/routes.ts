/**
 * Chain routes: `POST /rpc` (the public JSON-RPC filter, bounded per client by public-rpc.ts) and
 * `GET /chain` (D1), which tells SDKs the chain id, the public RPC, the contracts and the seller
 * (operator) address.
 */
import { Elysia, t } from "elysia";
import { access } from "../http/openapi.ts";
import type { Logger } from "../log.ts";
import { BodyTooLarge, readTextCapped } from "../http/body.ts";
import { streamsBody } from "../http/body-limit.ts";
import { clientIp } from "../http/client-ip.ts";
import { createPublicRpc, type RpcAnswer, type RpcLimits, UpstreamFailed } from "./public-rpc.ts";
import { MAX_RPC_BODY, rpcError } from "./rpc-filter.ts";
import type { ChainContext } from "./types.ts";

const address = t.String({ pattern: "^0x[0-9a-fA-F]{40}$" });

// /rpc reads its body itself, capped at MAX_RPC_BODY.
streamsBody((method, path) => method === "POST" && path === "/rpc");

/** A JSON-RPC error answer (a body too large, the chain gone). */
const rpcErrorBody = t.Object({ jsonrpc: t.Literal("2.0"), id: t.Null(), error: t.Object({ code: t.Integer(), message: t.String() }) });

const answer = ({ status, body, headers }: RpcAnswer) => Response.json(body, { status, headers });

/** `ageRecipient`: the gateway's age recipient, which priced encrypted entries escrow their keys to (D20). */
export const chainRoutes = ({ chain, publicUrl, log, ageRecipient, limits }: { chain: ChainContext; publicUrl: string; log: Logger; ageRecipient?: string; limits: RpcLimits }) => {
  const rpc = createPublicRpc({ forward: (chain.publicUpstream ?? chain.upstream).send, simulate: chain.simulate, readLogs: chain.readLogs, limits });
  const info = {
    chainId: chain.chain.id,
    rpcUrl: `${publicUrl}/rpc`,
    contracts: chain.contracts,
    seller: chain.operator.account.address,
    ...(ageRecipient ? { ageRecipient } : {}),
  };
  return new Elysia({ name: "chain" })
    .get("/chain", () => info, {
      detail: { summary: "Chain id, public RPC, contract addresses and seller of this gateway", tags: ["chain"], ...access.public },
      response: t.Object({ chainId: t.Number(), rpcUrl: t.String(), contracts: t.Object({ proxy: address, didRegistry: address, directory: address }), seller: address, ageRecipient: t.Optional(t.String({ description: "The gateway's age recipient (age1…): priced encrypted entries escrow their file keys to it, so that the gateway can give each buyer the key" })) }),
    })
    .post(
      "/rpc",
      async ({ request }) => {
        const ip = clientIp(request);
        // Counted before the body is read: a client over its budget costs no parsing.
        const refused = rpc.admit(ip);
        if (refused) return answer(refused);
        let body: unknown;
        try {
          body = JSON.parse(await readTextCapped(request, MAX_RPC_BODY));
        } catch (err) {
          if (err instanceof BodyTooLarge) return Response.json(rpcError(null, -32600, err.message), { status: 413 });
          return Response.json(rpcError(null, -32700, "Parse error"));
        }
        try {
          return answer(await rpc.handle(body, ip));
        } catch (err) {
          if (!(err instanceof UpstreamFailed)) throw err;
          log.warn("rpc upstream failed", { err: err.message });
          return Response.json(rpcError(null, -32603, "The chain did not answer"), { status: 502 });
        }
      },
      {
        parse: "none",
        detail: {
          summary: "Public JSON-RPC of the chain: standard reads and eth_sendRawTransaction only (single or batch)",
          description:
            `Bounded per client (an IPv4 address, an IPv6 /64): ${limits.perMinute > 0 ? `${limits.perMinute} calls a minute, each entry of a batch counting one (over it: 429 with Retry-After)` : "no rate limit on this gateway"}; ` +
            `batches of at most ${limits.maxBatch} entries; eth_call and eth_estimateGas run with at most ${limits.gasPerCall} gas each ` +
            `(a larger \`gas\` is refused with -32602) and ${limits.gasPerBatch} gas per request together (calls that name no gas share it), ` +
            `and end within ${limits.timeoutMs / 1000} s with a JSON-RPC error (-32000, execution aborted) when they run longer. ` +
            `eth_getLogs spans at most ${limits.logBlocks} blocks per call, and the eth_getLogs entries of one request return at most ${limits.maxLogs} logs together. ` +
            "A limit reached inside a request, or a gateway too busy to take a call, answers JSON-RPC error -32005 for the entries it stops.",
          tags: ["chain"],
          ...access.public,
        },
        body: t.Unknown({ description: "A JSON-RPC 2.0 request or batch" }),
        response: {
          200: t.Unknown({ description: "The JSON-RPC response or batch; a refused method answers a JSON-RPC error" }),
          413: rpcErrorBody,
          429: t.Object(
            { jsonrpc: t.Literal("2.0"), id: t.Null(), error: t.Object({ code: t.Literal(-32005), message: t.String() }) },
            { description: "The client is over its calls per minute; Retry-After says when to try again" },
          ),
          502: rpcErrorBody,
        },
      },
    );
};
