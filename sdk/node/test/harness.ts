// Runs the real rtcd for the tests: builds cmd/rtcd from the repository
// this package sits in (or takes RTCD_BIN), runs `rtcd init` and `rtcd
// serve` on free loopback ports, and stops it. Also records which routes
// the tests called.

import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** How long a started rtcd may take to answer. */
const readyTimeoutMs = 30_000;

/** The repository root: the first directory up from here holding cmd/rtcd. */
export function repoRoot(): string {
  let dir = process.cwd();
  for (;;) {
    if (existsSync(join(dir, "cmd", "rtcd"))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error("no cmd/rtcd above the working directory");
    dir = parent;
  }
}

let built: Promise<string> | undefined;

/** The rtcd binary: RTCD_BIN, or built once into a temporary directory. */
export function rtcdBinary(): Promise<string> {
  built ??= (async () => {
    const fromEnv = process.env["RTCD_BIN"];
    if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
    const dir = mkdtempSync(join(tmpdir(), "rtcd-sdk-node-bin-"));
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
    const bin = join(dir, "rtcd");
    await run("go", ["build", "-o", bin, "./cmd/rtcd"], { cwd: repoRoot(), maxBuffer: 16 << 20 });
    return bin;
  })();
  return built;
}

/** A free loopback address (host:port); the port may be taken again before use, so starts retry. */
export function freeAddr(): Promise<string> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const a = srv.address();
      srv.close(() => (a !== null && typeof a === "object" ? resolve(`127.0.0.1:${a.port}`) : reject(new Error("no address"))));
    });
  });
}

/** One running `rtcd serve`. */
export class RTCD {
  constructor(
    readonly base: string,
    readonly apiKey: string,
    readonly apiKeyId: string,
    readonly projectId: string,
    readonly accountId: string,
    readonly dataDir: string,
    readonly logPath: string,
    private readonly proc: ChildProcess,
    private readonly exited: Promise<void>,
  ) {}

  log(): string {
    return existsSync(this.logPath) ? readFileSync(this.logPath, "utf8") : "";
  }

  /** Stops the server: SIGINT (drain), then SIGKILL after 10 s; removes its data. */
  async stop(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill("SIGINT");
      const killer = setTimeout(() => this.proc.kill("SIGKILL"), 10_000);
      await this.exited;
      clearTimeout(killer);
    }
    rmSync(dirname(this.dataDir), { recursive: true, force: true });
  }
}

/** Runs `rtcd init` then `rtcd serve` (with serveFlags) in a new data directory. */
export async function startRTCD(serveFlags: string[] = []): Promise<RTCD> {
  const bin = await rtcdBinary();
  const root = mkdtempSync(join(tmpdir(), "rtcd-sdk-node-"));
  const dataDir = join(root, "data");
  const init = await run(bin, ["init", "--data-dir", dataDir, "--log-level", "error"]);
  const creds = JSON.parse(init.stdout) as { account_id: string; project_id: string; api_key_id: string; api_key: string };
  let last: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const api = await freeAddr();
    const metrics = await freeAddr();
    const logPath = join(root, `rtcd-${attempt}.log`);
    const fd = openSync(logPath, "w");
    const proc = spawn(bin, ["serve", "--data-dir", dataDir, "--listen", api, "--metrics-listen", metrics,
      "--media-listen", "127.0.0.1:0", "--log-level", "error", ...serveFlags], { stdio: ["ignore", fd, fd] });
    closeSync(fd);
    const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
    const s = new RTCD(`http://${api}`, creds.api_key, creds.api_key_id, creds.project_id, creds.account_id, dataDir, logPath, proc, exited);
    try {
      await waitReady(s, proc);
      return s;
    } catch (err) {
      last = err;
      proc.kill("SIGKILL");
      await exited;
    }
  }
  throw last;
}

async function waitReady(s: RTCD, proc: ChildProcess): Promise<void> {
  const deadline = Date.now() + readyTimeoutMs;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`rtcd serve exited during start:\n${s.log()}`);
    try {
      const res = await fetch(`${s.base}/v1/system/info`, { headers: { Authorization: `Bearer ${s.apiKey}` }, signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50)); // polling a starting process
  }
  throw new Error(`rtcd serve did not answer within ${readyTimeoutMs} ms:\n${s.log()}`);
}

/** The routes the tests called, as "METHOD /v1/path" with ids as {}. */
export const called = new Set<string>();
const idSegment = /\/(room|part|key|pay|we|wdl)_[^/]+/g;

/** A fetch that records each request's route, for the coverage check. */
export const recordingFetch: typeof fetch = (input, init) => {
  const url = new URL(typeof input === "string" ? input : input instanceof URL ? input.href : input.url);
  called.add(`${init?.method ?? "GET"} ${url.pathname.replace(idSegment, "/{}")}`);
  return fetch(input, init);
};
