/**
 * Outgoing mail: SMTP through nodemailer when `STOWAGE_SMTP_URL` is set, else the dev mailbox,
 * where each message becomes `DATA_DIR/mail/<unix-ms>-<seq>.eml` (names sort by time), which the
 * answer to a code request then names, so a newcomer trying the gateway finds the code. Logs name
 * the recipient and never the content: the content is a login code.
 *
 * @example
 *   const mailer = createMailer(config, log)
 *   await mailer.send({ to: "a@example.com", subject: "Your code", text: "…" })
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Transporter } from "nodemailer";
import type { Config } from "../config.ts";
import type { Logger } from "../log.ts";

export interface Mail {
  to: string;
  subject: string;
  text: string;
}

export interface Mailer {
  send(mail: Mail): Promise<void>;
  /** Where a mail goes when that is not the recipient's mailbox (the dev mailbox): told to whoever asked for a code. */
  readonly deliveredTo?: string;
}

/** SMTP answers slower than this count as a failure, so a dead relay cannot hang a request. */
const SMTP_TIMEOUT_MS = 15_000;

/**
 * nodemailer is loaded with the first message, not at start: it costs ≈ 17 MiB of RSS on its own
 * (the idle gateway's budget), and most gateways never send a login code.
 */
function lazyTransport(make: (nodemailer: (typeof import("nodemailer"))["default"]) => Transporter): () => Promise<Transporter> {
  let transport: Promise<Transporter> | undefined;
  return () => (transport ??= import("nodemailer").then((m) => make(m.default)));
}

export function smtpMailer(url: string, from: string, log: Logger): Mailer {
  const transport = lazyTransport((nodemailer) =>
    nodemailer.createTransport({
      url,
      connectionTimeout: SMTP_TIMEOUT_MS,
      greetingTimeout: SMTP_TIMEOUT_MS,
      socketTimeout: SMTP_TIMEOUT_MS,
    }),
  );
  return {
    async send(mail) {
      const info = await (await transport()).sendMail({ from, ...mail });
      log.info("mail sent", { to: mail.to, messageId: info.messageId });
    },
  };
}

export function devMailbox(dir: string, from: string, log: Logger): Mailer {
  // nodemailer renders the RFC 5322 message (headers, encodings) without sending it anywhere.
  const render = lazyTransport((nodemailer) => nodemailer.createTransport({ streamTransport: true, buffer: true, newline: "unix" }));
  let seq = 0;
  return {
    // A gateway with no mail server is one being tried out: the person asking for a code is the one
    // who can open its data dir, and nobody else could receive the code anyway. The folder is named
    // relative to the data dir: the server's own paths are nobody else's business.
    deliveredTo: "a file in the mail folder of the server's data dir (this gateway sends no mail: STOWAGE_SMTP_URL is not set)",
    async send(mail) {
      const info = await (await render()).sendMail({ from, ...mail });
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      seq = (seq + 1) % 1_000_000;
      const file = join(dir, `${Date.now()}-${String(seq).padStart(6, "0")}.eml`);
      // `buffer: true` makes the message a Buffer rather than a stream.
      writeFileSync(file, info.message as Buffer, { mode: 0o600 });
      log.info("mail written to the dev mailbox", { to: mail.to, file });
    },
  };
}

export function createMailer(config: Pick<Config, "smtpUrl" | "mailFrom" | "dataDir">, log: Logger): Mailer {
  return config.smtpUrl ? smtpMailer(config.smtpUrl, config.mailFrom, log) : devMailbox(join(config.dataDir, "mail"), config.mailFrom, log);
}
