// A real ACP client (the official SDK's stable v1 client app over ndJsonStream) driving a real
// `planwire acp` process with its own SQLite file. The SDK checks every message against the
// stable v1 schema and silently drops what does not validate; `invalid` collects what it
// reported, and every test asserts that nothing was.

import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, readdirSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

export const BIN = process.env.PLANWIRE_BIN;
if (!BIN) throw new Error("PLANWIRE_BIN is not set (run tests/acp/run.sh)");

/** What the SDK refused to deliver (it logs with console.error and drops the message). */
export const invalid = [];
const original = console.error;
console.error = (...args) => {
  const text = args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ");
  if (/Invalid message|Error handling/i.test(text)) invalid.push(text);
  original(...args);
};

/** A project directory and a database path of their own. */
export function workspace() {
  const dir = mkdtempSync(join(tmpdir(), "planwire-acp-"));
  const root = join(dir, "project");
  mkdirSync(join(root, "src"), { recursive: true });
  writeFileSync(join(root, "src", "main.rs"), 'fn main() {\n    println!("hello");\n}\n');
  return { dir, root, db: join(dir, "planwire.db"), stdinLog: join(dir, "stdin.log") };
}

/**
 * Starts `planwire acp` and connects the SDK client to it.
 * `elicitation`: answers `elicitation/create` (advertised only when given);
 * `permission`: answers `session/request_permission`.
 */
export function start(ws, { args = [], elicitation, permission, env = {} } = {}) {
  const child = spawn(BIN, ["acp", "--db", ws.db, ...args], {
    stdio: ["pipe", "pipe", "inherit"],
    env: { ...process.env, PLANWIRE_LOG: "warn", PLANWIRE_REPLAY_STDIN_LOG: ws.stdinLog, ...env },
  });
  const updates = [];
  const listeners = new Set();
  const asked = { elicitations: [], permissions: [] };
  let app = acp
    .client({ name: "planwire-acp-test" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      updates.push(params);
      for (const l of listeners) l();
    })
    .onRequest(acp.methods.client.session.requestPermission, async ({ params }) => {
      asked.permissions.push(params);
      if (!permission) return { outcome: { outcome: "cancelled" } };
      return permission(params);
    });
  if (elicitation) {
    app = app.onRequest(acp.methods.client.elicitation.create, async ({ params }) => {
      asked.elicitations.push(params);
      return elicitation(params);
    });
  }
  const conn = app.connect(acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)));
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  return {
    child,
    agent: conn.agent,
    updates,
    asked,
    exited,
    clientCapabilities: elicitation ? { elicitation: { form: {} } } : {},
    /** Resolves once `pred(updates)` holds (deadline: a busy 2-core machine is slow). */
    waitFor(pred, what, ms = 60_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (pred(updates)) {
            listeners.delete(check);
            clearTimeout(timer);
            resolve();
          }
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`timed out waiting for ${what}`));
        }, ms);
        listeners.add(check);
        check();
      });
    },
    /** Closes stdin: planwire stops its runs and exits. */
    async stop() {
      child.stdin.end();
      return exited;
    },
  };
}

export async function initialize(c) {
  return c.agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false, ...c.clientCapabilities },
    clientInfo: { name: "planwire-acp-test", version: "1.0.0" },
  });
}

/** The updates of one session, as `{kind, ...update}`. */
export function of(updates, sessionId) {
  return updates.filter((u) => u.sessionId === sessionId).map((u) => u.update);
}

export function kinds(updates) {
  return updates.map((u) => u.sessionUpdate);
}

/** All agent message text, in order. */
export function agentText(updates) {
  return updates
    .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content.type === "text")
    .map((u) => u.content.text)
    .join("");
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

export { acp };
