/**
 * The Pinning Service API's wire model (ipfs/pinning-services-api-spec v1.0.0), written once: the
 * routes validate and document with these schemas.
 */
import { t } from "elysia";

const status = t.Union([t.Literal("queued"), t.Literal("pinning"), t.Literal("pinned"), t.Literal("failed")]);
const strings = t.Record(t.String(), t.String({ maxLength: 2048 }));

export const pinBody = t.Object({
  cid: t.String({ minLength: 1, maxLength: 512, description: "Content Identifier (CID) to be pinned recursively" }),
  name: t.Optional(t.String({ maxLength: 255, description: "The file name the pinned content gets among the account's ipfs files (default: the CID)" })),
  origins: t.Optional(t.Array(t.String({ maxLength: 1024 }), { maxItems: 20, uniqueItems: true, description: "Multiaddrs (with /p2p/<peer id>) known to provide the data; dialled first" })),
  meta: t.Optional(strings),
});

export const pinStatus = t.Object({
  requestid: t.String(),
  status,
  created: t.String({ format: "date-time" }),
  pin: pinBody,
  delegates: t.Array(t.String(), { description: "This gateway's multiaddrs: peers connect here to send the data" }),
  info: t.Optional(strings),
});

export const pinResults = t.Object({ count: t.Integer({ minimum: 0 }), results: t.Array(pinStatus) });

export const pinFailure = t.Object({ error: t.Object({ reason: t.String(), details: t.Optional(t.String()) }) });

export const requestId = t.Object({ requestid: t.String({ maxLength: 64 }) });

export const listQuery = t.Object({
  cid: t.Optional(t.String({ description: "Up to 10 CIDs, comma-separated" })),
  name: t.Optional(t.String()),
  match: t.Optional(t.String({ enum: ["exact", "iexact", "partial", "ipartial"] })),
  status: t.Optional(t.String({ description: "Statuses, comma-separated (default: pinned)" })),
  before: t.Optional(t.String({ format: "date-time" })),
  after: t.Optional(t.String({ format: "date-time" })),
  limit: t.Optional(t.String({ description: "1 to 1000, default 10" })),
  meta: t.Optional(t.String({ description: "A JSON object: pins whose meta has each key with its value" })),
});

export const pinErrors = { 400: pinFailure, 401: pinFailure, 404: pinFailure, 409: pinFailure, 429: pinFailure, 503: pinFailure };
