/** Session grants (D19): the service to build at start (storage asks it), the routes to mount. */
export { createGrants, MAX_GRANT_S, type Grants, type GrantView } from "./service.ts";
export { grantsRoutes } from "./routes.ts";
