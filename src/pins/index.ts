/** The Pinning Service API (D25): the service and its worker, the routes to mount at /psa. */
export { createPins, MAX_PINS_PER_ACCOUNT, PIN_LEASE_MS, type Pins, type PinsDeps, type PinSettings, type PinBackend } from "./service.ts";
export { pinsBodyLimit, pinsRoutes } from "./routes.ts";
export { isPsaPath, PSA_PREFIX, pinsErrorEdge } from "./errors.ts";
