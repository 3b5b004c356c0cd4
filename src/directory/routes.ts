/** `GET /challenge` (spec 4.1 row 7): directory search. Thin: the service validates and answers. */
import { Elysia, t } from "elysia";
import type { Directory } from "./service.ts";
import { access, storageErrors } from "../http/openapi.ts";
import { SEARCH_LIMITS } from "./search.ts";

const result = t.Object({
  Mid: t.String({ description: "The published Cid string" }),
  Name: t.String(),
  Size: t.Number(),
  Public: t.Boolean({ description: "Free to read" }),
  Price: t.Number({ description: "Gwei to buy read permission (SDK buyRead)" }),
  keywords: t.Array(t.String()),
  Owner: t.String({ description: "The entry's owner address (extension: buyRead needs it)" }),
});

export const directoryRoutes = (directory: Pick<Directory, "search">) =>
  new Elysia({ name: "directory" }).get("/challenge", ({ query }) => directory.search(query), {
    query: t.Object({ query: t.Optional(t.String()), page: t.Optional(t.String()), size: t.Optional(t.String()) }, { additionalProperties: true }),
    detail: {
      summary: `Search published files by name and keywords (prefix, case- and accent-insensitive, bm25 order); page 1–${SEARCH_LIMITS.maxPage}, size 1–${SEARCH_LIMITS.maxSize} (default ${SEARCH_LIMITS.defaultSize}); no query lists the newest`,
      tags: ["directory"],
      ...access.public,
    },
    response: { 200: t.Array(result), ...storageErrors(400) },
  });
