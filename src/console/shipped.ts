/**
 * The folder scripts/build.ts embeds the bundled console in (`--asset dist/<name>` keeps the last
 * segment: `/$bunfs/root/<name>/` in the binary), and src/console/index.ts reads it from. Its own
 * module, so the build script names it without loading the server.
 */
export const SHIPPED_DIR = "stowage-console";
