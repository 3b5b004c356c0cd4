/** The account API (/v2): services to build at start, routes to mount, token checks for others. */
export { createAccountServices, type AccountServices } from "./services.ts";
export { accountRoutes } from "./routes.ts";
export { TokenError, type AccessClaims } from "./tokens.ts";
export type { AccountDeps, SignatureVerifier } from "./types.ts";
