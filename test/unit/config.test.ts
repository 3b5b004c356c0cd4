import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { chainClients, pollingOf } from "../../src/chain/clients.ts";
import { ConfigError, parseConfig, settings } from "../../src/config.ts";
import { tempDir } from "../support/tmp.ts";

describe("config", () => {
  test("defaults match the design's fixed names and values", () => {
    const c = parseConfig([], {});
    expect(c.port).toBe(8080);
    expect(c.host).toBe("0.0.0.0");
    expect(c.dataDir.endsWith("/data")).toBe(true);
    expect(c.chainId).toBe(985);
    expect(c.chainRpc).toBeUndefined();
    expect(c.smtpUrl).toBeUndefined();
    expect(c.maxBody).toBe(10 * 2 ** 30);
    expect(c.publicUrl).toBe("http://localhost:8080");
    expect(c.adminAddresses).toEqual([]);
    expect(c.accessTokenTtl).toBe(15 * 60_000);
    expect(c.refreshTokenTtl).toBe(30 * 86_400_000);
  });

  test("the metrics listener: 127.0.0.1:9464 by default; empty or off (environment or flag) turns it off; a bad address is refused by name", () => {
    expect(parseConfig([], {}).metricsListen).toBe("127.0.0.1:9464");
    // An empty value is otherwise "unset" (the default); here it is the documented way to say off.
    expect(parseConfig([], { STOWAGE_METRICS_LISTEN: "" }).metricsListen).toBe("");
    expect(parseConfig([], { STOWAGE_METRICS_LISTEN: "off" }).metricsListen).toBe("");
    expect(parseConfig(["--metrics-listen", "off"], {}).metricsListen).toBe("");
    expect(parseConfig([], { STOWAGE_METRICS_LISTEN: "[::1]:0" }).metricsListen).toBe("[::1]:0");
    expect(() => parseConfig([], { STOWAGE_METRICS_LISTEN: "9464" })).toThrow("STOWAGE_METRICS_LISTEN: must be HOST:PORT");
    expect(() => parseConfig([], { STOWAGE_METRICS_LISTEN: "a:70000" })).toThrow(ConfigError);
  });

  test("server flags go through node:util parseArgs: --name=value too, and a value starting with - only in that form", () => {
    expect(parseConfig(["--port=9001"], {}).port).toBe(9001);
    expect(parseConfig(["--metrics-listen="], {}).metricsListen).toBe("");
    expect(() => parseConfig(["--host", "-x"], {})).toThrow('--host needs a value (one that starts with "-" goes as --host=-…)');
    expect(() => parseConfig(["stray"], {})).toThrow("unknown option stray");
  });

  test("environment variables override defaults", () => {
    const c = parseConfig([], {
      STOWAGE_PORT: "9001",
      STOWAGE_CHAIN_RPC: "http://127.0.0.1:8545",
      STOWAGE_MAX_BODY: "512MiB",
      ADMIN_ADDRESSES: "0xAbC0000000000000000000000000000000000001, 0xdef0000000000000000000000000000000000002",
      STOWAGE_ALLOWED_ORIGINS: "https://a.example,https://b.example",
    });
    expect(c.port).toBe(9001);
    expect(c.chainRpc).toBe("http://127.0.0.1:8545");
    expect(c.maxBody).toBe(512 * 2 ** 20);
    expect(c.adminAddresses).toEqual(["0xabc0000000000000000000000000000000000001", "0xdef0000000000000000000000000000000000002"]);
    expect(c.allowedOrigins).toEqual(["https://a.example", "https://b.example"]);
    expect(c.publicUrl).toBe("http://localhost:9001");
  });

  test("flags override the environment, in both --flag value and --flag=value forms", () => {
    const c = parseConfig(["--port", "7000", "--data-dir=/tmp/x", "--public-url", "https://files.example/"], { STOWAGE_PORT: "9001" });
    expect(c.port).toBe(7000);
    expect(c.dataDir).toBe("/tmp/x");
    expect(c.publicUrl).toBe("https://files.example");
  });

  test("receipts are polled as STOWAGE_CHAIN_POLL says, else every 25 ms on the embedded chain and every 2 s on an external one", () => {
    const poll = (argv: string[], env: Record<string, string>, embedded: boolean) =>
      chainClients(985, "http://127.0.0.1:8545", pollingOf(parseConfig(argv, env).chainPoll, embedded)).publicClient.pollingInterval;
    expect(poll([], {}, true)).toBe(25);
    expect(poll([], {}, false)).toBe(2000);
    expect(poll([], { STOWAGE_CHAIN_POLL: "250ms" }, false)).toBe(250);
    expect(poll(["--chain-poll", "1s"], { STOWAGE_CHAIN_POLL: "250ms" }, true)).toBe(1000);
  });

  test("an empty environment variable counts as unset", () => {
    expect(parseConfig([], { STOWAGE_PORT: "" }).port).toBe(8080);
  });

  const bad: [string[], Record<string, string>, RegExp][] = [
    [["--port", "http"], {}, /--port: must be a non-negative integer/],
    [[], { STOWAGE_PORT: "70000" }, /STOWAGE_PORT: must be a port number/],
    [[], { STOWAGE_MAX_BODY: "lots" }, /STOWAGE_MAX_BODY: must be a size/],
    [[], { STOWAGE_CHAIN_RPC: "not a url" }, /STOWAGE_CHAIN_RPC: must be an absolute URL/],
    [[], { STOWAGE_PROXY_ADDRESS: "0x12" }, /STOWAGE_PROXY_ADDRESS: must be a 0x-prefixed 20-byte hex address/],
    [[], { STOWAGE_ACCESS_TOKEN_TTL: "soon" }, /must be a duration/],
    [[], { STOWAGE_LOG_LEVEL: "loud" }, /STOWAGE_LOG_LEVEL/],
    [["--log-level", "loud"], {}, /^--log-level: must be one of debug, info, warn, error \(got "loud"\)$/],
    [[], { STOWAGE_RATE_LIMITS: "no" }, /^STOWAGE_RATE_LIMITS: must be one of on, off \(got "no"\)$/],
    [[], { STOWAGE_EMBEDDED_CHAIN: "geth" }, /^STOWAGE_EMBEDDED_CHAIN: must be one of auto, anvil, evm \(got "geth"\)$/],
    [[], { STOWAGE_CHAIN_POLL: "0" }, /^STOWAGE_CHAIN_POLL: must be more than 0 \(got "0"\)$/],
    [["--indexer-poll", "0ms"], {}, /^--indexer-poll: must be more than 0 \(got "0ms"\)$/],
    [["--database-pool", "0"], {}, /^--database-pool: must be more than 0 \(got "0"\)$/],
    [["--nope", "1"], {}, /unknown option --nope/],
    [["--port"], {}, /--port needs a value/],
  ];
  for (const [argv, env, message] of bad) {
    test(`bad value is a ConfigError: ${JSON.stringify([argv, env])}`, () => {
      expect(() => parseConfig(argv, env)).toThrow(ConfigError);
      expect(() => parseConfig(argv, env)).toThrow(message);
    });
  }

  test("a bad private key is reported without echoing it", () => {
    const secret = "0xdeadbeef";
    try {
      parseConfig([], { STOWAGE_OPERATOR_KEY: secret });
      throw new Error("should have failed");
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toContain("STOWAGE_OPERATOR_KEY");
      expect((err as Error).message).not.toContain(secret);
    }
  });

  test("secrets have no command-line flag", () => {
    expect("flag" in settings.operatorKey).toBe(false);
    expect("flag" in settings.adminKey).toBe(false);
    expect("flag" in settings.messengerBotToken).toBe(false);
  });

  test("client settings belong to the user commands: the server neither takes their flags nor stops on them", () => {
    expect(() => parseConfig(["--gateway", "http://gw.example"], {})).toThrow("unknown option --gateway");
    expect(parseConfig([], { STOWAGE_USER_KEY: "0xnot-a-key" }).port).toBe(8080);
    expect(() => parseConfig([], { STOWAGE_USER_KEY: "0xnot-a-key" }, "client")).toThrow("STOWAGE_USER_KEY");
    expect(parseConfig(["--gateway", "http://gw.example/"], {}, "client").gateway).toBe("http://gw.example");
    expect(() => parseConfig(["--port", "1"], {}, "client")).toThrow("unknown option --port");
  });

  describe("object store settings (D15)", () => {
    const s3 = { STOWAGE_S3_ENDPOINT: "http://127.0.0.1:7480/", STOWAGE_S3_BUCKET: "b", STOWAGE_S3_ACCESS_KEY_ID: "ak", STOWAGE_S3_SECRET_ACCESS_KEY: "sk" };

    test("unset by default: content stays in the data dir", () => {
      const c = parseConfig([], {});
      expect(c.s3Endpoint).toBeUndefined();
      expect(c.s3Region).toBe("us-east-1");
      expect(c.s3Prefix).toBe("");
    });

    test("a complete set is taken as given", () => {
      const c = parseConfig(["--s3-prefix", "stowage/", "--s3-region", "eu-west-1"], s3);
      expect(c.s3Endpoint).toBe("http://127.0.0.1:7480");
      expect([c.s3Bucket, c.s3AccessKeyId, c.s3SecretAccessKey, c.s3Prefix, c.s3Region]).toEqual(["b", "ak", "sk", "stowage/", "eu-west-1"]);
    });

    for (const missing of ["STOWAGE_S3_BUCKET", "STOWAGE_S3_ACCESS_KEY_ID", "STOWAGE_S3_SECRET_ACCESS_KEY"] as const) {
      test(`an endpoint without ${missing} is refused, naming it`, () => {
        const env: Record<string, string> = { ...s3 };
        delete env[missing];
        expect(() => parseConfig([], env)).toThrow(new ConfigError(`${missing}: must be set when STOWAGE_S3_ENDPOINT is`));
      });
    }

    test("a bucket or keys without an endpoint are refused rather than silently ignored", () => {
      expect(() => parseConfig([], { STOWAGE_S3_BUCKET: "b" })).toThrow(/^STOWAGE_S3_ENDPOINT: must be set when STOWAGE_S3_BUCKET is/);
    });

    test("the keys are environment only, and a bad prefix is refused", () => {
      expect("flag" in settings.s3AccessKeyId).toBe(false);
      expect("flag" in settings.s3SecretAccessKey).toBe(false);
      for (const prefix of ["/abs", "a//b", "a b/", "../x"]) expect(() => parseConfig([], { ...s3, STOWAGE_S3_PREFIX: prefix })).toThrow("STOWAGE_S3_PREFIX");
      expect(parseConfig([], { ...s3, STOWAGE_S3_PREFIX: "team.a/stowage-1/" }).s3Prefix).toBe("team.a/stowage-1/");
    });

    test("the user commands do not check the server's object store", () => {
      expect(parseConfig([], { STOWAGE_S3_ENDPOINT: "http://127.0.0.1:7480" }, "client").gateway).toBe("http://localhost:8080");
    });

    test("stowage serve exits 2 and names the missing variable", async () => {
      const proc = Bun.spawn([process.execPath, join(import.meta.dir, "..", "..", "src", "main.ts"), "serve"], {
        env: { PATH: process.env.PATH ?? "", STOWAGE_S3_ENDPOINT: "http://127.0.0.1:7480", STOWAGE_S3_BUCKET: "b", STOWAGE_S3_ACCESS_KEY_ID: "ak", STOWAGE_DATA_DIR: tempDir("s3cfg") },
        stdout: "pipe",
        stderr: "pipe",
      });
      expect(await proc.exited).toBe(2);
      expect(await new Response(proc.stderr).text()).toContain("STOWAGE_S3_SECRET_ACCESS_KEY: must be set when STOWAGE_S3_ENDPOINT is");
    });
  });
});
