/** The file directory (D10): services to build at start, routes to mount. */
export { createDirectory, type Directory, type DirectoryDeps } from "./service.ts";
export { directoryRoutes } from "./routes.ts";
export type { SearchResult } from "./search.ts";
