/**
 * A few DOM helpers, so the pages read as the markup they build: `h("button", { onclick }, "Go")`.
 * Text goes in as text nodes (never as HTML), so nothing a server or a user typed becomes markup.
 */

type Child = Node | string | number | false | null | undefined;
type Attrs = Record<string, string | number | boolean | EventListener | undefined>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: (Child | Child[])[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(typeof c === "number" ? String(c) : c);
  return el;
}

/** Replaces the page's content. */
export function show(...nodes: Node[]) {
  const view = document.getElementById("view") as HTMLElement;
  view.replaceChildren(...nodes);
}

/** The line at the bottom: what just happened, or what went wrong. */
export function status(text: string, error = false) {
  const line = document.getElementById("status") as HTMLElement;
  line.textContent = text;
  line.className = error ? "error" : "";
}

/** Runs an action from a button: disables it meanwhile and reports a failure on the status line. */
export function action(run: (button: HTMLButtonElement) => Promise<void>) {
  return async (e: Event) => {
    e.preventDefault();
    const button = (e.currentTarget instanceof HTMLFormElement ? e.currentTarget.querySelector("button[type=submit]") : e.currentTarget) as HTMLButtonElement | null;
    if (button) button.disabled = true;
    try {
      await run(button as HTMLButtonElement);
    } catch (err) {
      status(message(err), true);
    } finally {
      if (button) button.disabled = false;
    }
  };
}

/** What an error says, shortest useful form first (a wallet's rejection, a server's Description). */
export function message(err: unknown): string {
  if (err && typeof err === "object") {
    const e = err as { shortMessage?: string; body?: { Description?: string }; message?: string };
    return e.body?.Description ?? e.shortMessage ?? e.message ?? String(err);
  }
  return String(err);
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];
export function bytes(n: number | bigint): string {
  let v = Number(n);
  let u = 0;
  while (Math.abs(v) >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u ? v.toFixed(1) : v} ${UNITS[u]}`;
}

export const when = (unixSeconds: number) => (unixSeconds > 0 ? new Date(unixSeconds * 1000).toLocaleString() : "—");

/** The value of a named control of a form. */
export const field = (form: HTMLFormElement, name: string) => (form.elements.namedItem(name) as HTMLInputElement).value.trim();
