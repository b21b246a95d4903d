// planwire mcp, driven by the official MCP TypeScript SDK client, with the `script` planner
// (recorded Claude Code streams replayed as real child processes) for determinism. The SDK
// validates structuredContent against each tool's outputSchema; Ajv's 2020-12 build checks
// that every schema is one.

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Ajv2020 from "ajv/dist/2020.js";
import { CallToolResultSchema, McpError, ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { call, children, close, connect, groupMembers, stdinLines, textOf, until, workspace } from "./harness.mjs";

const TOOLS = [
  "create_ticket", "plan", "get_plan", "list_tickets", "get_ticket",
  "answer", "stop", "breakdown", "export_plan", "handoff",
];

async function ticket(c, ws, title = "Change the greeting") {
  const r = await call(c, "create_ticket", { title, root: ws.root });
  assert.ok(!r.isError, textOf(r));
  return r.structuredContent.ticket.id;
}

test("initialize negotiates 2025-11-25 with tools, resources and tasks; every schema is valid 2020-12", async () => {
  const ws = workspace();
  const c = await connect(ws);
  try {
    const init = c.wire.find((m) => m.in?.result?.protocolVersion).in.result;
    assert.equal(init.protocolVersion, "2025-11-25");
    assert.equal(c.client.getServerVersion().name, "planwire");
    const caps = c.client.getServerCapabilities();
    assert.equal(caps.resources.subscribe, true);
    assert.deepEqual(caps.tasks.requests.tools.call, {});
    assert.ok(caps.tasks.cancel && caps.tasks.list);
    assert.ok(!("resultType" in init), "no 2026-07-28 resultType on a 2025-11-25 session");
    const { tools } = await c.client.listTools();
    assert.deepEqual(tools.map((t) => t.name), TOOLS);
    const ajv = new Ajv2020({ strict: false });
    for (const t of tools) {
      assert.ok(ajv.validateSchema(t.inputSchema), `${t.name} input: ${ajv.errorsText()}`);
      assert.ok(ajv.validateSchema(t.outputSchema), `${t.name} output: ${ajv.errorsText()}`);
      ajv.compile(t.inputSchema);
      ajv.compile(t.outputSchema);
      assert.equal(t.annotations.destructiveHint, false, t.name);
      assert.ok(t.title, t.name);
      const long = ["plan", "answer", "breakdown"].includes(t.name);
      assert.equal(t.execution?.taskSupport, long ? "optional" : undefined, t.name);
    }
    assert.equal(tools.find((t) => t.name === "get_plan").annotations.readOnlyHint, true);
    assert.equal(tools.find((t) => t.name === "plan").annotations.readOnlyHint, false);
  } finally {
    await close(c);
  }
});

test("create and plan: progress notifications, the plan as markdown and as structuredContent", async () => {
  const ws = workspace();
  // A `claude` on PATH for the hand-off's command (it is never run).
  const bin = join(ws.dir, "bin");
  mkdirSync(bin);
  writeFileSync(join(bin, "claude"), "#!/bin/sh\necho '2.1.197 (Claude Code)'\n", { mode: 0o755 });
  const c = await connect(ws, { roots: [ws.root], env: { PATH: `${bin}:${process.env.PATH}` } });
  try {
    // No root: the client's first root.
    const created = await call(c, "create_ticket", { title: "Change the greeting" });
    assert.equal(created.structuredContent.ticket.root, realpathSync(ws.root));
    const id = created.structuredContent.ticket.id;
    const progress = [];
    const r = await call(c, "plan", { ticketId: id }, { onprogress: (p) => progress.push(p) });
    assert.ok(!r.isError, textOf(r));
    const { tools } = await c.client.listTools();
    const validate = new Ajv2020({ strict: false }).compile(tools.find((t) => t.name === "plan").outputSchema);
    assert.ok(validate(r.structuredContent), JSON.stringify(validate.errors));
    assert.equal(r.structuredContent.status, "planned");
    assert.equal(r.structuredContent.version, 1);
    assert.equal(r.structuredContent.plan.title, "Change the greeting printed by main");
    assert.match(textOf(r), /^# Change the greeting printed by main/);
    assert.ok(progress.some((p) => /^Read/.test(p.message)), JSON.stringify(progress));
    const values = progress.map((p) => p.progress);
    assert.deepEqual(values, [...values].sort((a, b) => a - b));
    const exported = await call(c, "export_plan", { ticketId: id });
    assert.ok(exported.structuredContent.path.startsWith(realpathSync(ws.root)), textOf(exported));
    const again = await call(c, "export_plan", { ticketId: id });
    assert.ok(again.isError, "an existing file is never overwritten");
    const handoff = await call(c, "handoff", { ticketId: id, tool: "claude" });
    assert.ok(!handoff.isError, textOf(handoff));
    assert.equal(handoff.structuredContent.argv[0], join(bin, "claude"));
    assert.match(textOf(handoff), /planwire runs nothing/);
  } finally {
    await close(c);
  }
});

test("a live question is answered through elicitation (form mode) in the same run", async () => {
  const ws = workspace();
  const c = await connect(ws, { model: "ask", elicit: async () => ({ action: "accept", content: { q01: "Hi there" } }) });
  try {
    const id = await ticket(c, ws, "Pick a greeting");
    const r = await call(c, "plan", { ticketId: id });
    assert.equal(r.structuredContent.status, "planned", textOf(r));
    assert.equal(c.asked.length, 1);
    assert.equal(c.asked[0].mode, "form");
    const field = c.asked[0].requestedSchema.properties.q01;
    assert.deepEqual(field.oneOf.map((o) => o.const), ["Hello, world (Recommended)", "Hi there"]);
    assert.equal(stdinLines(ws).filter((l) => l.includes("control_response") && l.includes("Hi there")).length, 1);
  } finally {
    await close(c);
  }
});

test("without elicitation: needs_input with the question's id, then answer continues the same run", async () => {
  const ws = workspace();
  const c = await connect(ws, { model: "ask" });
  try {
    const id = await ticket(c, ws, "Pick a greeting");
    const first = await call(c, "plan", { ticketId: id });
    assert.equal(first.structuredContent.status, "needs_input");
    const q = first.structuredContent.questions[0];
    assert.equal(q.source, "live");
    const second = await call(c, "answer", { ticketId: id, answers: [{ selected: ["Hi there"] }] });
    assert.equal(second.structuredContent.status, "planned", textOf(second));
    assert.equal(second.structuredContent.runId, first.structuredContent.runId);
    assert.ok(stdinLines(ws).some((l) => l.includes("control_response") && l.includes("Hi there")));
  } finally {
    await close(c);
  }
});

test("an aborted plan sends notifications/cancelled and leaves no process behind", async () => {
  const ws = workspace();
  const c = await connect(ws, { model: "slow" });
  try {
    const id = await ticket(c, ws, "Slow one");
    const abort = new AbortController();
    const pending = call(c, "plan", { ticketId: id }, { signal: abort.signal });
    // The slow script prints text for a minute: stop it while it runs.
    const planner = await until("the planner", () => children(c.pid)[0]);
    assert.ok(groupMembers(planner).length > 0, "it leads its own process group");
    abort.abort("the person changed their mind");
    await assert.rejects(pending);
    assert.ok(c.wire.some((m) => m.out?.method === "notifications/cancelled"));
    const shown = await until("the run's end", async () => {
      const s = await call(c, "get_ticket", { ticketId: id });
      return s.structuredContent.runs[0].status !== "running" && s;
    });
    assert.equal(shown.structuredContent.runs[0].status, "cancelled");
    assert.deepEqual(groupMembers(planner), [], "no process of the planner's group is left");
    const sent = c.wire.filter((m) => m.out?.method === "tools/call" && m.out.params.name === "plan").at(-1).out.id;
    assert.ok(!c.wire.some((m) => m.in && !m.in.method && m.in.id === sent), "no response to the cancelled request");
  } finally {
    await close(c);
  }
});

test("a task-augmented plan: created at once, polled, elicits with its task id, then the plan", async () => {
  const ws = workspace();
  const c = await connect(ws, { model: "ask", elicit: async () => ({ action: "accept", content: { q01: "Hi there" } }) });
  try {
    const id = await ticket(c, ws, "Pick a greeting");
    await c.client.listTools();
    const messages = [];
    const stream = c.client.experimental.tasks.callToolStream(
      { name: "plan", arguments: { ticketId: id } },
      CallToolResultSchema,
      { task: { ttl: 600_000 }, timeout: 120_000 },
    );
    for await (const m of stream) messages.push(m);
    const types = messages.map((m) => m.type);
    assert.equal(types[0], "taskCreated", JSON.stringify(messages));
    const created = messages[0].task;
    assert.equal(created.status, "working");
    assert.equal(created.ttl, 600_000);
    const result = messages.at(-1);
    assert.equal(result.type, "result", JSON.stringify(messages));
    assert.equal(result.result.structuredContent.status, "planned");
    assert.equal(result.result._meta["io.modelcontextprotocol/related-task"].taskId, created.taskId);
    assert.equal(c.asked[0]._meta["io.modelcontextprotocol/related-task"].taskId, created.taskId);
    const listed = await c.client.experimental.tasks.listTasks();
    assert.equal(listed.tasks.find((t) => t.taskId === created.taskId).status, "completed");
    const statuses = c.wire.filter((m) => m.in?.method === "notifications/tasks/status").map((m) => m.in.params.status);
    assert.ok(statuses.includes("input_required") && statuses.at(-1) === "completed", statuses.join());
  } finally {
    await close(c);
  }
});

test("tasks/cancel stops a task's run: cancelled, and its process group is gone when it answers", async () => {
  const ws = workspace();
  const c = await connect(ws, { model: "slow" });
  try {
    const id = await ticket(c, ws, "Slow one");
    const created = await c.client.request(
      { method: "tools/call", params: { name: "plan", arguments: { ticketId: id }, task: {} } },
      (await import("@modelcontextprotocol/sdk/experimental/tasks/types.js")).CreateTaskResultSchema,
    );
    const taskId = created.task.taskId;
    await until("the planner", () => children(c.pid).length > 0);
    const [planner] = children(c.pid);
    const cancelled = await c.client.experimental.tasks.cancelTask(taskId);
    assert.equal(cancelled.status, "cancelled");
    assert.deepEqual(groupMembers(planner), []);
    const got = await c.client.experimental.tasks.getTask(taskId);
    assert.equal(got.status, "cancelled");
    await assert.rejects(c.client.experimental.tasks.cancelTask(taskId), (e) => e instanceof McpError && e.code === -32602);
  } finally {
    await close(c);
  }
});

test("plans are resources: listed, read, and a subscription hears of a new version", async () => {
  const ws = workspace();
  const c = await connect(ws);
  const updated = [];
  c.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => updated.push(n.params.uri));
  try {
    const id = await ticket(c, ws);
    await call(c, "plan", { ticketId: id });
    const uri = `planwire://ticket/${id}/plan`;
    const { resources } = await c.client.listResources();
    assert.deepEqual(resources.map((r) => r.uri), [uri]);
    const { resourceTemplates } = await c.client.listResourceTemplates();
    assert.deepEqual(resourceTemplates.map((t) => t.uriTemplate).sort(), [
      "planwire://ticket/{id}/plan",
      "planwire://ticket/{id}/plan/{version}",
    ]);
    const first = await c.client.readResource({ uri });
    assert.equal(first.contents[0].mimeType, "text/markdown");
    await c.client.subscribeResource({ uri });
    const r = await call(c, "plan", { ticketId: id, feedback: "Also print it in French." });
    assert.equal(r.structuredContent.version, 2);
    await until("resources/updated", () => updated.includes(uri));
    const v1 = await c.client.readResource({ uri: `${uri}/1` });
    assert.equal(v1.contents[0].text, first.contents[0].text);
  } finally {
    await close(c);
  }
});

test("bad input gets MCP errors and the server stays up", async () => {
  const ws = workspace();
  const c = await connect(ws);
  try {
    await assert.rejects(call(c, "rm_rf", {}), (e) => e instanceof McpError && e.code === -32602);
    const wrong = await call(c, "plan", { ticketId: [1] });
    assert.ok(wrong.isError && /ticketId/.test(textOf(wrong)), textOf(wrong));
    const unknown = await call(c, "plan", { ticketId: 4242 });
    assert.ok(unknown.isError && /4242/.test(textOf(unknown)), textOf(unknown));
    const big = await call(c, "plan", { ticketId: 1, feedback: "x".repeat(200_000) });
    assert.ok(big.isError && /feedback/.test(textOf(big)), textOf(big));
    await assert.rejects(c.client.readResource({ uri: "file:///etc/passwd" }), (e) => e.code === -32002);
    await assert.rejects(c.client.request({ method: "prompts/list", params: {} }, CallToolResultSchema), (e) => e.code === -32601);
    assert.equal((await c.client.listTools()).tools.length, TOOLS.length);
  } finally {
    await close(c);
  }
});
