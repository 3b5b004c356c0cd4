/** The one function the contract test uses of js-yaml 3 (which ships no types). */
declare module "js-yaml" {
  export function load(text: string): unknown;
}
