/**
 * Debian's S3 clients, aws-cli (/usr/bin/aws: another `aws` earlier on PATH, such as a pyenv shim,
 * is not the one meant), rclone and boto3 (python3-boto3; `boto3Python` picks the interpreter), for
 * the S3 API's end-to-end tests (D18). Installed when missing (`scripts/s3-clients.sh install`,
 * which holds a lock so parallel callers wait).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./tmp.ts";

const ROOT = join(import.meta.dir, "..", "..");
export const AWS = "/usr/bin/aws";
export const RCLONE = "/usr/bin/rclone";
const BOTO3 = "/usr/lib/python3/dist-packages/boto3/__init__.py";

export async function ensureS3Clients(): Promise<void> {
  if ((await Bun.file(AWS).exists()) && (await Bun.file(RCLONE).exists()) && (await Bun.file(BOTO3).exists())) return;
  const proc = Bun.spawn(["sh", join(ROOT, "scripts", "s3-clients.sh"), "install"], { stdout: "inherit", stderr: "inherit" });
  if ((await proc.exited) !== 0) throw new Error("installing aws-cli, rclone and boto3 failed (scripts/s3-clients.sh install): see the output above");
}

export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

export interface ClientRun {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(cmd: string[], env: Record<string, string>, cwd?: string): Promise<ClientRun> {
  const proc = Bun.spawn(cmd, { env, cwd, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

/**
 * aws-cli configured as the README says: a profile with path-style addressing, the key in the
 * environment, the endpoint on the command line; nothing of this shell's own configuration.
 */
export function awsCli(endpoint: string, key: Credentials) {
  const home = tempDir("aws-home");
  const config = join(home, "config");
  writeFileSync(config, "[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n");
  const env = { HOME: home, PATH: "/usr/bin:/bin", AWS_CONFIG_FILE: config, AWS_SHARED_CREDENTIALS_FILE: join(home, "none"), AWS_ACCESS_KEY_ID: key.accessKeyId, AWS_SECRET_ACCESS_KEY: key.secretAccessKey, AWS_PAGER: "" };
  return (args: string[], cwd?: string) => run([AWS, "--endpoint-url", endpoint, ...args], env, cwd);
}

/** rclone with a remote `stow:` configured through the environment (as README's config file says). */
export function rclone(endpoint: string, key: Credentials) {
  const home = tempDir("rclone-home");
  const env = {
    HOME: home,
    PATH: "/usr/bin:/bin",
    RCLONE_CONFIG: join(home, "none.conf"),
    RCLONE_CONFIG_STOW_TYPE: "s3",
    RCLONE_CONFIG_STOW_PROVIDER: "Other",
    RCLONE_CONFIG_STOW_ACCESS_KEY_ID: key.accessKeyId,
    RCLONE_CONFIG_STOW_SECRET_ACCESS_KEY: key.secretAccessKey,
    RCLONE_CONFIG_STOW_ENDPOINT: endpoint,
    RCLONE_CONFIG_STOW_REGION: "us-east-1",
    RCLONE_CONFIG_STOW_FORCE_PATH_STYLE: "true",
  };
  return (args: string[]) => run([RCLONE, ...args], env);
}

/**
 * A python3 that has boto3: the first `python3` on PATH that does (often a newer boto3 than
 * Debian's, which sends CRC checksums by default), else Debian's (python3-boto3), installed through
 * scripts/s3-clients.sh when neither has it. The interpreter's own path, so no shim is needed.
 */
export async function boto3Python(): Promise<string> {
  const probe = async (cmd: string) => {
    try {
      const proc = Bun.spawn([cmd, "-c", "import boto3, sys; print(sys.executable)"], { stdout: "pipe", stderr: "ignore" });
      const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
      return code === 0 ? out.trim() : undefined;
    } catch {
      return undefined;
    }
  };
  const found = (await probe("python3")) ?? (await probe("/usr/bin/python3"));
  if (found) return found;
  const proc = Bun.spawn(["sh", join(import.meta.dir, "..", "..", "scripts", "s3-clients.sh"), "install-boto3"], { stdout: "inherit", stderr: "inherit" });
  if ((await proc.exited) !== 0) throw new Error("installing python3-boto3 failed (scripts/s3-clients.sh install-boto3)");
  return "/usr/bin/python3";
}

/**
 * Runs a Python script with boto3's client `s3` set up for `endpoint` (path style, no retries)
 * and `key`, and `out(value)` to print a result as JSON (`resultOf` reads the last one back).
 */
export function boto3Script(python: string, endpoint: string, key: Credentials) {
  const home = tempDir("boto3-home");
  const env = { HOME: home, PATH: "/usr/bin:/bin", AWS_CONFIG_FILE: join(home, "none"), AWS_SHARED_CREDENTIALS_FILE: join(home, "none"), AWS_ACCESS_KEY_ID: key.accessKeyId, AWS_SECRET_ACCESS_KEY: key.secretAccessKey, AWS_DEFAULT_REGION: "us-east-1" };
  const prelude = [
    "import boto3, botocore, json, sys",
    "from botocore.config import Config",
    `s3 = boto3.client("s3", endpoint_url=${JSON.stringify(endpoint)}, config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))`,
    "def out(value):",
    "    print(json.dumps(value, default=str))",
    "",
  ].join("\n");
  return (script: string, cwd?: string) => run([python, "-c", prelude + script], env, cwd);
}

/** The last value a script printed with `out`, parsed; undefined when it failed or printed none. */
export const resultOf = (r: { code: number; stdout: string }): unknown => (r.code === 0 && r.stdout.trim() ? JSON.parse(r.stdout.trim().split("\n").at(-1) as string) : undefined);
