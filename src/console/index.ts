/**
 * The web console (D19) at `/console`: one page and its hashed assets, built by Bun's HTML
 * bundler from `web/index.html`, minified. scripts/build.ts bundles it before compiling and embeds
 * the files in the binary (`--asset`, read from the binary's own file system under
 * `stowage-console/`): the compile's own flags minify only syntax, which left the page's script
 * at ~800 KB instead of ~430. Run from source, the page is bundled once, at its first request.
 * Either way nothing is read from disk at run time in the binary and nothing comes from a CDN.
 *
 * Every answer carries a strict Content-Security-Policy (scripts, styles and connections to this
 * origin only: the account API, the storage routes and the chain RPC `/rpc` are all here) and
 * `X-Content-Type-Options: nosniff`. The Referrer-Policy is `same-origin`, not `no-referrer`: a
 * browser sends no Origin on a same-origin GET, and the EVM sign-in challenge then reads the
 * page's origin from the Referer.
 */
import { Elysia, t } from "elysia";
import { readdirSync } from "node:fs";
import { basename, join } from "node:path";
import { access } from "../http/openapi.ts";
import { SHIPPED_DIR } from "./shipped.ts";

interface Asset {
  body: Uint8Array<ArrayBuffer>;
  type: string;
}

const PREFIX = "/console";
/** Under a fixed segment of their own: `/console/<name>` would be a path of the storage routes' `/:type/…` shapes. */
const ASSETS = `${PREFIX}/assets`;

/** Asset names as the bundler makes them (`chunk-<hash>.js`): nothing else is ever looked up. */
const ASSET_NAME = /^[A-Za-z0-9._-]{1,100}$/;


const TYPES: Record<string, string> = { ".html": "text/html;charset=utf-8", ".js": "text/javascript;charset=utf-8", ".css": "text/css;charset=utf-8" };

/** The page's own references to its assets (`/x.js`, `./x.js`) point under /console/assets. */
function rebase(html: string, names: readonly string[]) {
  let out = html;
  for (const name of names) out = out.replaceAll(`"/${name}"`, `"${ASSETS}/${name}"`).replaceAll(`"./${name}"`, `"${ASSETS}/${name}"`);
  return out;
}

async function bundled(): Promise<{ html: string; assets: Map<string, Asset> }> {
  const assets = new Map<string, Asset>();
  let html: string | undefined;
  const shipped = join(import.meta.dir, SHIPPED_DIR);
  let names: string[] = [];
  try {
    names = readdirSync(shipped);
  } catch {}
  if (names.length) {
    for (const name of names) {
      const body = await Bun.file(join(shipped, name)).bytes();
      if (name === "index.html") html = new TextDecoder().decode(body);
      else assets.set(name, { body, type: TYPES[name.slice(name.lastIndexOf("."))] ?? "application/octet-stream" });
    }
  } else {
    const built = await Bun.build({ entrypoints: [join(import.meta.dir, "web", "index.html")], target: "browser", minify: true, splitting: true });
    if (!built.success) throw new AggregateError(built.logs, "bundling the console failed");
    for (const o of built.outputs) {
      const body = new Uint8Array(await o.arrayBuffer());
      // (Every output of an HTML entry says loader "html": the type tells the page apart.)
      if (o.type.startsWith("text/html")) html = new TextDecoder().decode(body);
      else assets.set(basename(o.path), { body, type: o.type });
    }
  }
  if (html === undefined) throw new Error("the console bundle has no page");
  return { html: rebase(html, [...assets.keys()]), assets };
}

/** The policy: this origin only, plus the public URL's (clients are told to use it; it serves /rpc). */
export function consolePolicy(publicUrl: string) {
  let publicOrigin = "";
  try {
    publicOrigin = ` ${new URL(publicUrl).origin}`;
  } catch {}
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data: blob:",
    `connect-src 'self'${publicOrigin}`,
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join("; ");
}

export function consoleRoutes({ publicUrl }: { publicUrl: string }) {
  let loading: ReturnType<typeof bundled> | undefined;
  const load = () => {
    loading ??= bundled().catch((err) => {
      loading = undefined; // a failed bundle is not kept: the next request tries again
      throw err;
    });
    return loading;
  };
  const security = {
    "content-security-policy": consolePolicy(publicUrl),
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
  };
  const index = async () =>
    new Response((await load()).html, { headers: { ...security, "content-type": "text/html; charset=utf-8", "cache-control": "no-cache" } });

  // Documented like the other routes, though no client calls them but a browser.
  const pageRoute = { detail: { summary: "The web console's page", tags: ["console"], ...access.public }, response: { 200: t.Unknown({ description: "text/html" }) } };
  return new Elysia({ name: "console" })
    // (Elysia answers /console/ here too: paths are not strict.)
    .get(PREFIX, index, pageRoute)
    .get(
      `${ASSETS}/:asset`,
      async ({ params }) => {
        const asset = ASSET_NAME.test(params.asset) ? (await load()).assets.get(params.asset) : undefined;
        if (!asset) return new Response("Not Found", { status: 404, headers: { ...security, "content-type": "text/plain; charset=utf-8" } });
        // Names carry their content's hash: a name always means the same bytes.
        return new Response(asset.body, { headers: { ...security, "content-type": asset.type, "cache-control": "public, max-age=31536000, immutable" } });
      },
      {
        params: t.Object({ asset: t.String({ description: "A bundled asset's name, hashed (chunk-<hash>.js, .css)" }) }),
        detail: { summary: "A script or stylesheet of the web console", tags: ["console"], ...access.public },
        response: { 200: t.Unknown({ description: "text/javascript or text/css" }), 404: t.Unknown({ description: "text/plain: no such asset" }) },
      },
    );
}
