/**
 * The `/openapi` page's script and style, carried inside the binary (D19): the page must work
 * offline and load nothing from a CDN, so Swagger UI's bundle is served from here instead of
 * unpkg. `type: "file"` imports are embedded by `bun build --compile`.
 *
 * @example
 *   app.use(openapiAssets("/openapi")).use(openapi({ provider: "swagger-ui", swagger: openapiUi("/openapi") }))
 */
import { Elysia } from "elysia";
import bundle from "swagger-ui-dist/swagger-ui-bundle.js" with { type: "file" };
import css from "swagger-ui-dist/swagger-ui.css" with { type: "file" };

const ASSETS = {
  "swagger-ui-bundle.js": { path: bundle, type: "text/javascript; charset=utf-8" },
  "swagger-ui.css": { path: css, type: "text/css; charset=utf-8" },
} as const;

/** The page's settings: its assets from this server, and no calls to swagger.io's validator. */
export const openapiUi = (base: string) => ({
  cdn: `${base}/swagger-ui-bundle.js`,
  theme: `${base}/swagger-ui.css`,
  validatorUrl: "none",
});

export const openapiAssets = (base: string) => {
  const app = new Elysia({ name: "openapi-assets" });
  for (const [name, asset] of Object.entries(ASSETS)) {
    app.get(`${base}/${name}`, () => new Response(Bun.file(asset.path), { headers: { "content-type": asset.type, "cache-control": "public, max-age=86400" } }), {
      detail: { hide: true },
    });
  }
  return app;
};
