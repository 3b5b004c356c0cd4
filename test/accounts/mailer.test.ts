/**
 * Code mail as it leaves the server: through a real SMTP server (smtp-server, in this test) when
 * STOWAGE_SMTP_URL is set, into the dev mailbox (DATA_DIR/mail/*.eml) when not, which the answer
 * then names. Neither logs the code.
 * A relay that is down or refuses the mail makes a 503 and leaves no usable code (D11, D12).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { SMTPServer } from "smtp-server";
import { createLogger } from "../../src/log.ts";
import { accountsApp } from "../support/accounts.ts";

interface Received {
  from: string;
  to: string[];
  raw: string;
}

/** An SMTP refusal with its reply code, as smtp-server sends it to the client. */
const refusal = (code: number, text: string) => Object.assign(new Error(text), { responseCode: code });

/** `refuse` makes the server refuse every recipient (at RCPT TO) or every message (after DATA,
 * having read it): what a relay does with an address it will not deliver to, or with spam. */
async function startSmtp(refuse?: "recipient" | "message") {
  const received: Received[] = [];
  const server = new SMTPServer({
    authOptional: true,
    // Plain SMTP on loopback: the test is about the message, not TLS.
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onRcptTo(_address, _session, done) {
      done(refuse === "recipient" ? refusal(550, "5.1.1 mailbox unavailable") : undefined);
    },
    onData(stream, session, done) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        received.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
          to: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks).toString("utf8"),
        });
        done(refuse === "message" ? refusal(554, "5.7.1 message refused") : undefined);
      });
    },
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const port = (server.server.address() as { port: number }).port;
  return { received, url: `smtp://127.0.0.1:${port}`, close: () => new Promise<void>((ok) => server.close(() => ok())) };
}

const capture = () => {
  const lines: string[] = [];
  return { lines, log: createLogger("debug", (l) => lines.push(l)) };
};

describe("code mail", () => {
  test("goes through SMTP with the code in the subject and the text body, and is not logged", async () => {
    const smtp = await startSmtp();
    afterAll(smtp.close);
    const logs = capture();
    const { call } = accountsApp({
      env: { STOWAGE_SMTP_URL: smtp.url, STOWAGE_MAIL_FROM: "Stowage Test <codes@stowage.test>" },
      accounts: { mailer: undefined, log: logs.log },
    });
    const r = await call("POST", "/v2/login/email/code", { body: { email: "Alice@Example.com" } });
    expect(r.status).toBe(200);
    expect(r.body.message).toBe("A code was sent to this address; it is valid for 10 minutes");
    expect(smtp.received).toHaveLength(1);
    const mail = smtp.received[0]!;
    expect(mail.from).toBe("codes@stowage.test");
    expect(mail.to).toEqual(["alice@example.com"]);
    const code = /^Subject: .*?(\d{6})/m.exec(mail.raw)?.[1];
    expect(code).toMatch(/^\d{6}$/);
    expect(mail.raw).toContain("Content-Type: text/plain");
    expect(mail.raw.split(/\r?\n\r?\n/).slice(1).join("\n")).toContain(code!);

    const login = await call("POST", "/v2/login/email", { body: { email: "alice@example.com", code, source: "test" } });
    expect(login.status).toBe(200);
    expect(logs.lines.join("\n")).toContain("mail sent");
    expect(logs.lines.join("\n")).not.toContain(code!);
  });

  test("an SMTP server that is down makes a 503, not a hang or a 500", async () => {
    const smtp = await startSmtp();
    await smtp.close();
    const { call } = accountsApp({ env: { STOWAGE_SMTP_URL: smtp.url }, accounts: { mailer: undefined } });
    const r = await call("POST", "/v2/login/email/code", { body: { email: "bob@example.com" } });
    expect(r).toMatchObject({ status: 503, body: { result: -1, error: "UNAVAILABLE" } });
  });

  test("an SMTP server that refuses the message makes a 503, and the code it saw does not log in", async () => {
    const smtp = await startSmtp("message");
    afterAll(smtp.close);
    const { call } = accountsApp({ env: { STOWAGE_SMTP_URL: smtp.url }, accounts: { mailer: undefined } });
    const r = await call("POST", "/v2/login/email/code", { body: { email: "erin@example.com" } });
    expect(r).toMatchObject({ status: 503, body: { result: -1, error: "UNAVAILABLE", message: "The code could not be sent; try again later" } });
    // The relay read the whole message before refusing it: the code went over the wire.
    expect(smtp.received).toHaveLength(1);
    const code = /^Subject: .*?(\d{6})/m.exec(smtp.received[0]!.raw)?.[1];
    expect(code).toMatch(/^\d{6}$/);
    const login = await call("POST", "/v2/login/email", { body: { email: "erin@example.com", code, source: "test" } });
    expect(login).toMatchObject({ status: 400, body: { result: -1, error: "CODE_INVALID" } });
  });

  test("an SMTP server that refuses the recipient makes a 503 and leaves no open code", async () => {
    const smtp = await startSmtp("recipient");
    afterAll(smtp.close);
    const { call, database } = accountsApp({ env: { STOWAGE_SMTP_URL: smtp.url }, accounts: { mailer: undefined } });
    const r = await call("POST", "/v2/login/email/code", { body: { email: "frank@example.com" } });
    expect(r).toMatchObject({ status: 503, body: { result: -1, error: "UNAVAILABLE", message: "The code could not be sent; try again later" } });
    expect(smtp.received).toHaveLength(0);
    const open = await database.sql.get<{ n: number }>("SELECT count(*) AS n FROM email_codes WHERE email = $1 AND closed_at IS NULL", ["frank@example.com"]);
    expect(open?.n).toBe(0);
    // Nor does the failed send count as "a code sent less than a minute ago": a retry is sent.
    const retry = await call("POST", "/v2/login/email/code", { body: { email: "frank@example.com" } });
    expect(retry).toMatchObject({ status: 503, body: { error: "UNAVAILABLE" } });
  });

  test("without SMTP, lands in DATA_DIR/mail as <unix-ms>-<seq>.eml, code in subject and text, not in the log", async () => {
    const logs = capture();
    const { call, dataDir } = accountsApp({ accounts: { mailer: undefined, log: logs.log } });
    const dir = join(dataDir, "mail");
    for (const email of ["carol@example.com", "dave@example.com"]) {
      const r = await call("POST", "/v2/login/email/code", { body: { email } });
      expect(r.status).toBe(200);
      // Whoever tries a gateway without mail learns where the code went (the console shows it).
      expect(r.body.message).toBe(`A code was sent to this address; it is valid for 10 minutes. It was written to a file in the mail folder of the server's data dir (this gateway sends no mail: STOWAGE_SMTP_URL is not set)`);
    }
    const files = readdirSync(dir).sort();
    expect(files).toHaveLength(2);
    for (const f of files) expect(f).toMatch(/^\d{13}-\d{6}\.eml$/);
    expect(statSync(join(dir, files[0]!)).mode & 0o777).toBe(0o600);

    const eml = readFileSync(join(dir, files[1]!), "utf8");
    expect(eml).toMatch(/^To: dave@example\.com$/m);
    const code = /^Subject: Your Stowage code: (\d{6})$/m.exec(eml)?.[1];
    expect(code).toMatch(/^\d{6}$/);
    expect(eml).toContain("Content-Type: text/plain");
    expect(eml.split("\n\n").slice(1).join("\n")).toContain(`Your Stowage code is ${code}.`);

    const logged = logs.lines.join("\n");
    expect(logged).toContain("dev mailbox");
    expect(logged).not.toContain(code!);
    const login = await call("POST", "/v2/login/email", { body: { email: "dave@example.com", code, source: "test" } });
    expect(login.status).toBe(200);
  });
});
