// A real MCP client (the official TypeScript SDK's Client over its StdioClientTransport)
// driving a real `planwire mcp` process with its own SQLite file. Every JSON-RPC message in
// either direction is kept in `wire`, so a test can assert on what crossed it.

import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, readdirSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema, ListRootsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

export const BIN = process.env.PLANWIRE_BIN;
if (!BIN) throw new Error("PLANWIRE_BIN is not set (run tests/mcp/run.sh)");
/** Deadlines only bound a hang: the machine may be slow and busy. */
export const DEADLINE = 120_000;

/** A project directory and a database path of their own. */
export function workspace() {
  const dir = mkdtempSync(join(tmpdir(), "planwire-mcp-ts-"));
  const root = join(dir, "project");
  mkdirSync(join(root, "src"), { recursive: true });
  writeFileSync(join(root, "src", "main.rs"), 'fn main() {\n    println!("hello");\n}\n');
  return { dir, root, db: join(dir, "planwire.db"), stdinLog: join(dir, "stdin.log") };
}

/**
 * Starts `planwire mcp` and connects the SDK client to it (initialize included).
 * `elicit`: answers `elicitation/create` (the capability is declared only when given);
 * `roots`: the client's roots (declared only when given); `env`: more environment.
 */
export async function connect(ws, { model = "demo", elicit, roots, env = {} } = {}) {
  const transport = new StdioClientTransport({
    command: BIN,
    args: ["mcp", "--db", ws.db, "--tool", "script", "--model", model],
    env: { ...getDefaultEnvironment(), PLANWIRE_LOG: "warn", PLANWIRE_REPLAY_STDIN_LOG: ws.stdinLog, ...env },
    cwd: ws.root,
    stderr: "inherit",
  });
  const wire = [];
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    wire.push({ out: message });
    return send(message, options);
  };
  const capabilities = {};
  if (elicit) capabilities.elicitation = { form: {} };
  if (roots) capabilities.roots = { listChanged: false };
  const client = new Client({ name: "planwire-mcp-test", version: "1.0.0" }, { capabilities });
  const asked = [];
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request.params);
      return elicit(request.params);
    });
  }
  if (roots) {
    client.setRequestHandler(ListRootsRequestSchema, async () => ({
      roots: roots.map((r) => ({ uri: pathToFileURL(r).href, name: "project" })),
    }));
  }
  const connecting = client.connect(transport);
  // The Protocol has set onmessage by now: keep what comes in too.
  const onmessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    wire.push({ in: message });
    onmessage?.(message, extra);
  };
  await connecting;
  return { client, transport, wire, asked, pid: transport.pid };
}

export async function close(c) {
  await c.client.close();
}

/** A tool call with a generous timeout that progress keeps alive. */
export function call(c, name, args, options = {}) {
  return c.client.callTool({ name, arguments: args }, undefined, {
    timeout: DEADLINE,
    resetTimeoutOnProgress: true,
    ...options,
  });
}

export function textOf(result) {
  return result.content.filter((b) => b.type === "text").map((b) => b.text).join("");
}

/** Processes whose process group is `pgid` (zombies included). */
export function groupMembers(pgid) {
  const members = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(fields[2]) === pgid) members.push(Number(entry));
  }
  return members;
}

/** The pids of a process's children (planwire runs its planners as direct children). */
export function children(pid) {
  const tasks = `/proc/${pid}/task`;
  if (!existsSync(tasks)) return [];
  const out = [];
  for (const t of readdirSync(tasks)) {
    try {
      out.push(...readFileSync(`${tasks}/${t}/children`, "utf8").split(/\s+/).filter(Boolean).map(Number));
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

/** Lines planwire wrote to interactive script planners' stdin (their prompts and answers). */
export function stdinLines(ws) {
  if (!existsSync(ws.stdinLog)) return [];
  return readFileSync(ws.stdinLog, "utf8").split("\n").filter(Boolean);
}

export async function until(what, pred, ms = DEADLINE) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
