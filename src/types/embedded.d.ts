// `with { type: "file" }` imports resolve to a path (a real one in development, a $bunfs one in
// the compiled binary); TypeScript needs to be told so.
declare module "@foundry-rs/anvil-linux-amd64/bin/anvil" {
  const path: string;
  export default path;
}
declare module "swagger-ui-dist/swagger-ui-bundle.js" {
  const path: string;
  export default path;
}
declare module "swagger-ui-dist/swagger-ui.css" {
  const path: string;
  export default path;
}
