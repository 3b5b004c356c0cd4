/**
 * The one rule for answers that carry user bytes (src/http/user-content.ts): nosniff and the
 * sandbox always; an attachment for every type a browser would render as a document or run; a
 * script never with a script type. The three paths that serve user bytes are tested over their
 * routes (test/storage/download.test.ts, test/s3api/api.test.ts, test/gateway/trustless.test.ts).
 */
import { describe, expect, test } from "bun:test";
import { isActiveType, USER_CONTENT_POLICY, userContentHeaders } from "../../src/http/user-content.ts";

describe("userContentHeaders", () => {
  test("every answer: nosniff and a sandbox that loads and runs nothing", () => {
    for (const name of ["a.png", "a.html", "a.bin", "README"]) {
      expect(userContentHeaders({ name })).toMatchObject({ "x-content-type-options": "nosniff", "content-security-policy": "sandbox; default-src 'none'" });
    }
    expect(USER_CONTENT_POLICY).toBe("sandbox; default-src 'none'");
  });

  test("what a browser would render as a document or run is an attachment, also where passive types may show inline", () => {
    const active = ["page.html", "page.htm", "page.shtml", "page.xhtml", "page.xht", "pic.svg", "pic.svgz", "data.xml", "style.xsl", "feed.rss", "feed.atom", "app.js", "app.mjs", "style.css", "doc.pdf", "math.mathml", "movie.swf", "unknown.wml"];
    for (const name of active) {
      const headers = userContentHeaders({ name, attachment: "active" });
      expect({ name, disposition: headers["content-disposition"] }).toEqual({ name, disposition: `attachment; filename="${name}"; filename*=UTF-8''${name}` });
    }
    for (const name of ["photo.png", "photo.jpg", "clip.mp4", "song.mp3", "notes.txt", "data.json", "table.csv", "blob.bin", "README"]) {
      expect({ name, disposition: userContentHeaders({ name, attachment: "active" })["content-disposition"] }).toEqual({ name, disposition: undefined });
      expect(userContentHeaders({ name })["content-disposition"]).toStartWith("attachment;");
    }
  });

  test("types are read by their essence, whatever their case and parameters", () => {
    for (const type of ["text/html", "TEXT/HTML; charset=utf-8", "image/svg+xml", "application/xhtml+xml", "text/xml", "application/xml", "application/vnd.foo+xml", "text/javascript;charset=utf-8", "multipart/x-mixed-replace"]) {
      expect({ type, active: isActiveType(type) }).toEqual({ type, active: true });
    }
    for (const type of ["image/png", "IMAGE/JPEG", "video/mp4", "audio/ogg", "text/plain; charset=utf-8", "application/octet-stream", "font/woff2"]) {
      expect({ type, active: isActiveType(type) }).toEqual({ type, active: false });
    }
  });

  test("a script is never sent as one: under nosniff no <script src> or worker of the gateway's origins runs it", () => {
    for (const name of ["app.js", "app.mjs", "app.cjs"]) expect(userContentHeaders({ name })["content-type"]).toBe("text/plain; charset=utf-8");
    for (const type of ["application/javascript", "application/x-javascript", "text/ecmascript", "Text/JavaScript; charset=utf-8"]) {
      expect(userContentHeaders({ name: "x", type })["content-type"]).toBe("text/plain; charset=utf-8");
    }
    // Other types are sent as they are.
    expect(userContentHeaders({ name: "page.html" })["content-type"]).toBe("text/html;charset=utf-8");
    expect(userContentHeaders({ name: "x.car", type: "application/vnd.ipld.car; version=1" })["content-type"]).toBe("application/vnd.ipld.car; version=1");
  });
});
