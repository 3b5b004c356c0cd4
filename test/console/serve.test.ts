/**
 * The console's page and assets as the app serves them (D19): a strict Content-Security-Policy
 * and nosniff on every answer, assets from this origin only (no CDN), a browser bundle with no
 * Node or Bun module in it, and unknown assets 404. The compiled binary serving it with no files
 * on disk is checked by test/console/browser.test.ts.
 */
import { expect, test } from "bun:test";
import { get, testApp } from "../support/app.ts";

const { app } = testApp({ env: { STOWAGE_PUBLIC_URL: "https://gw.example:8443" } });

test("GET /console answers the page with a strict CSP, and its assets from /console/", async () => {
  for (const path of ["/console", "/console/"]) {
    const res = await app.handle(get(path));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self';");
    expect(csp).toContain("connect-src 'self' https://gw.example:8443;");
    expect(csp).not.toContain("unsafe-inline");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    const html = await res.text();
    // No inline script, nothing from elsewhere.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
    const assets = [...html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1] as string);
    expect(assets.some((a) => a.endsWith(".js"))).toBe(true);
    expect(assets.some((a) => a.endsWith(".css"))).toBe(true);
    for (const a of assets) {
      const asset = await app.handle(get(a));
      expect(asset.status).toBe(200);
      expect(asset.headers.get("x-content-type-options")).toBe("nosniff");
      expect(asset.headers.get("content-security-policy")).toBe(csp);
      const body = await asset.text();
      if (a.endsWith(".js")) {
        expect(asset.headers.get("content-type")).toStartWith("text/javascript");
        // Bundled for the browser: no Node or Bun module is imported at run time.
        expect(body).not.toMatch(/from\s*"(node|bun):|require\(\s*"(node|bun):/);
      }
    }
  }
});

test("an unknown asset is 404, a path outside the name pattern too", async () => {
  expect((await app.handle(get("/console/assets/nope.js"))).status).toBe(404);
  expect((await app.handle(get("/console/assets/..%2Fpackage.json"))).status).toBe(404);
});
