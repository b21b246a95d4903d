// planwire acp, driven by the official ACP TypeScript SDK, with the `script` planner (recorded
// Claude Code streams replayed as real child processes) for determinism.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  acp, agentText, children, initialize, invalid, kinds, of, start, stdinLines, workspace,
} from "./harness.mjs";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** True once `planwire/plan` takes `feedback` (issue 14): the feedback then reaches the planner. */
const FEEDBACK_PARAM = (() => {
  const schema = JSON.parse(readFileSync(join(REPO, "protocol", "schema.json"), "utf8"));
  return Boolean(schema.$defs?.PlanParams?.properties?.feedback);
})();

function prompt(c, sessionId, text) {
  return c.agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text }],
  });
}

async function newSession(c, cwd) {
  return c.agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
}

test("initialize announces protocol 1, loadSession, an object sessionCapabilities.list, embedded context", async () => {
  const ws = workspace();
  const c = start(ws, { args: ["--tool", "script"] });
  try {
    const r = await initialize(c);
    assert.equal(r.protocolVersion, 1);
    assert.equal(r.agentInfo.name, "planwire");
    assert.match(r.agentInfo.version, /^\d+\.\d+\.\d+/);
    assert.equal(r.agentCapabilities.loadSession, true);
    assert.deepEqual(r.agentCapabilities.sessionCapabilities.list, {});
    assert.equal(typeof r.agentCapabilities.sessionCapabilities.resume, "object");
    assert.equal(r.agentCapabilities.promptCapabilities.embeddedContext, true);
    assert.equal(r.agentCapabilities.promptCapabilities.image, false);
  } finally {
    assert.equal((await c.stop()).code, 0);
  }
  assert.deepEqual(invalid, []);
});

test("a session plans a ticket: chunks, a tool call, the plan as markdown, end_turn; list; load in a fresh process replays", async () => {
  const ws = workspace();
  const c = start(ws, { args: ["--tool", "script", "--model", "demo"] });
  let sessionId;
  try {
    await initialize(c);
    const s = await newSession(c, ws.root);
    sessionId = s.sessionId;
    assert.match(sessionId, /^draft-/);
    assert.equal(s.modes.currentModeId, "plan");
    assert.deepEqual(s.modes.availableModes.map((m) => m.id), ["plan"]);
    const planner = s.configOptions.find((o) => o.id === "planner");
    assert.equal(planner.currentValue, "script");
    assert.ok(planner.options.some((o) => o.value === "script"));
    assert.equal(s.configOptions.find((o) => o.id === "model").currentValue, "demo");
    await c.waitFor((u) => kinds(of(u, sessionId)).includes("available_commands_update"), "the commands");

    const reply = await prompt(c, sessionId, "Change the greeting\nMake main print a friendlier greeting.");
    assert.equal(reply.stopReason, "end_turn");
    // Everything of the prompt arrived before its response.
    const mine = of(c.updates, sessionId);
    const ks = kinds(mine);
    assert.ok(ks.includes("agent_message_chunk"), ks.join());
    assert.ok(ks.includes("agent_thought_chunk"), ks.join());
    const call = mine.find((u) => u.sessionUpdate === "tool_call");
    assert.ok(call, "a tool call");
    assert.equal(call.kind, "read");
    assert.match(call.title, /^Read /);
    const result = mine.find((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === call.toolCallId);
    assert.equal(result.status, "completed");
    const text = agentText(mine);
    assert.ok(!text.includes("<planwire-plan>"), "the plan block is not shown raw");
    assert.match(text, /# Change the greeting printed by main/);
    assert.match(text, /## Acceptance criteria/);
    const plan = mine.find((u) => u.sessionUpdate === "plan");
    assert.ok(plan.entries.length > 0, "plan entries");
    assert.ok(plan.entries.every((e) => e.status === "pending" && e.content.length > 0));
    const info = mine.filter((u) => u.sessionUpdate === "session_info_update").at(-1);
    assert.equal(info.title, "Change the greeting");

    const list = await c.agent.request(acp.methods.agent.session.list, { cwd: ws.root });
    assert.equal(list.sessions.length, 1);
    assert.equal(list.sessions[0].sessionId, "ticket-1");
    assert.equal(list.sessions[0].title, "Change the greeting");
    assert.ok(list.sessions[0].cwd.endsWith("project"));
    assert.ok(list.sessions[0].updatedAt);
    assert.equal(list.nextCursor ?? null, null);
  } finally {
    assert.equal((await c.stop()).code, 0);
  }

  // A fresh process on the same database loads the ticket, replaying it before it answers.
  const d = start(ws, { args: ["--tool", "script"] });
  try {
    await initialize(d);
    const loaded = await d.agent.request(acp.methods.agent.session.load, {
      sessionId: "ticket-1",
      cwd: ws.root,
      mcpServers: [],
    });
    assert.equal(loaded.modes.currentModeId, "plan");
    const replay = of(d.updates, "ticket-1");
    const user = replay.find((u) => u.sessionUpdate === "user_message_chunk");
    assert.match(user.content.text, /# Change the greeting/);
    assert.ok(replay.some((u) => u.sessionUpdate === "tool_call" && u.kind === "read"));
    assert.match(agentText(replay), /# Change the greeting printed by main/);
    assert.ok(replay.some((u) => u.sessionUpdate === "plan"));
    // The user's words come before the planner's.
    assert.ok(replay.indexOf(user) < replay.findIndex((u) => u.sessionUpdate === "tool_call"));
  } finally {
    assert.equal((await d.stop()).code, 0);
  }
  assert.deepEqual(invalid, []);
});

test("session/cancel stops the run: the prompt answers cancelled with no planner process left", async () => {
  const ws = workspace();
  const c = start(ws, { args: ["--tool", "script", "--model", "slow"] });
  try {
    await initialize(c);
    const { sessionId } = await newSession(c, ws.root);
    const reply = prompt(c, sessionId, "Slow one");
    await c.waitFor((u) => kinds(of(u, sessionId)).includes("agent_message_chunk"), "the first text");
    assert.ok(children(c.child.pid).length > 0, "the planner runs as a child of planwire acp");
    await c.agent.notify(acp.methods.agent.session.cancel, { sessionId });
    const r = await reply;
    assert.equal(r.stopReason, "cancelled");
    assert.deepEqual(children(c.child.pid), [], "no planner process is left when the prompt answers");
    assert.match(agentText(of(c.updates, sessionId)), /Planning was stopped/);
    const list = await c.agent.request(acp.methods.agent.session.list, {});
    assert.equal(list.sessions[0].sessionId, "ticket-1");
  } finally {
    assert.equal((await c.stop()).code, 0);
  }
  assert.deepEqual(invalid, []);
});

test("a live question is answered through elicitation; a feedback prompt resumes the session", async () => {
  const ws = workspace();
  const c = start(ws, {
    args: ["--tool", "script", "--model", "ask"],
    elicitation: async () => ({ action: "accept", content: { q01: "Hi there" } }),
  });
  try {
    await initialize(c);
    const { sessionId } = await newSession(c, ws.root);
    const first = await prompt(c, sessionId, "Pick a greeting");
    assert.equal(first.stopReason, "end_turn");
    assert.equal(c.asked.elicitations.length, 1);
    const e = c.asked.elicitations[0];
    assert.equal(e.mode, "form");
    assert.equal(e.sessionId, sessionId);
    const field = e.requestedSchema.properties.q01;
    assert.deepEqual(field.oneOf.map((o) => o.const), ["Hello, world (Recommended)", "Hi there"]);
    // The answer reached the waiting planner, and the same run went on to its plan.
    const answers = stdinLines(ws).filter((l) => l.includes("control_response") && l.includes("Hi there"));
    assert.equal(answers.length, 1, stdinLines(ws).join("\n"));
    assert.ok(of(c.updates, sessionId).some((u) => u.sessionUpdate === "plan"));

    const feedback = "Also print the greeting in French.";
    const second = await prompt(c, sessionId, feedback);
    assert.equal(second.stopReason, "end_turn");
    const prompts = stdinLines(ws).filter((l) => l.includes('"type":"user"'));
    assert.equal(prompts.length, 2);
    assert.match(prompts[1], /user-feedback/, "the second run resumes with a continuation prompt");
    if (FEEDBACK_PARAM) assert.ok(prompts[1].includes(feedback), "the feedback reaches the planner");
  } finally {
    assert.equal((await c.stop()).code, 0);
  }
  // Replayed in a fresh process, the feedback comes between the two plans.
  const d = start(ws, { args: ["--tool", "script"] });
  try {
    await initialize(d);
    await d.agent.request(acp.methods.agent.session.load, { sessionId: "ticket-1", cwd: ws.root, mcpServers: [] });
    const replay = of(d.updates, "ticket-1");
    const plans = replay.map((u, i) => (u.sessionUpdate === "plan" ? i : -1)).filter((i) => i >= 0);
    assert.equal(plans.length, 1, "the latest plan's entries, once");
    const said = replay.findIndex((u) => u.sessionUpdate === "user_message_chunk" && u.content.text.includes("French"));
    if (FEEDBACK_PARAM) {
      assert.ok(said > 0, "the feedback is replayed");
      const firstPlanText = replay.findIndex((u) => u.sessionUpdate === "agent_message_chunk" && /Acceptance criteria/.test(u.content.text));
      assert.ok(firstPlanText < said && said < plans[0], `order: ${firstPlanText} < ${said} < ${plans[0]}`);
    }
  } finally {
    assert.equal((await d.stop()).code, 0);
  }
  assert.deepEqual(invalid, []);
});

test("without elicitation, a single-choice live question is a permission request", async () => {
  const ws = workspace();
  const c = start(ws, {
    args: ["--tool", "script", "--model", "ask"],
    permission: async (p) => ({
      outcome: { outcome: "selected", optionId: p.options.find((o) => o.name === "Hi there").optionId },
    }),
  });
  try {
    await initialize(c);
    const { sessionId } = await newSession(c, ws.root);
    const r = await prompt(c, sessionId, "Pick a greeting");
    assert.equal(r.stopReason, "end_turn");
    assert.equal(c.asked.permissions.length, 1);
    assert.deepEqual(
      c.asked.permissions[0].options.map((o) => o.name),
      ["Hello, world (Recommended)", "Hi there", "Skip: let the planner assume"],
    );
    assert.ok(stdinLines(ws).some((l) => l.includes("control_response") && l.includes("Hi there")));
    assert.ok(of(c.updates, sessionId).some((u) => u.sessionUpdate === "plan"));
  } finally {
    assert.equal((await c.stop()).code, 0);
  }
  assert.deepEqual(invalid, []);
});

test("/breakdown announces its tickets as sessions that load; /tickets lists them", async () => {
  const ws = workspace();
  const c = start(ws, { args: ["--tool", "script", "--model", "breakdown"] });
  try {
    await initialize(c);
    const { sessionId } = await newSession(c, ws.root);
    const r = await prompt(c, sessionId, "/breakdown Serve the greeting over HTTP and show it in the UI.");
    assert.equal(r.stopReason, "end_turn");
    const text = agentText(of(c.updates, sessionId));
    const ids = [...text.matchAll(/`(ticket-\d+)`/g)].map((m) => m[1]);
    assert.ok(ids.length >= 2, text);
    const loaded = await c.agent.request(acp.methods.agent.session.load, {
      sessionId: ids[0],
      cwd: ws.root,
      mcpServers: [],
    });
    assert.ok(loaded.configOptions.length === 2);
    assert.ok(of(c.updates, ids[0]).some((u) => u.sessionUpdate === "plan"));
    // session/resume binds a ticket without replaying it.
    const resumed = await c.agent.request(acp.methods.agent.session.resume, { sessionId: ids[1], cwd: ws.root });
    assert.equal(resumed.modes.currentModeId, "plan");
    await c.waitFor((u) => kinds(of(u, ids[1])).includes("available_commands_update"), "the commands");
    assert.deepEqual(kinds(of(c.updates, ids[1])), ["available_commands_update"]);
    const t = await prompt(c, sessionId, "/tickets");
    assert.equal(t.stopReason, "end_turn");
    assert.ok(ids.every((id) => agentText(of(c.updates, sessionId)).includes(id)));
  } finally {
    assert.equal((await c.stop()).code, 0);
  }
  assert.deepEqual(invalid, []);
});

test("config options and modes: planner and model change, only `plan` is a mode", async () => {
  const ws = workspace();
  const c = start(ws, { args: ["--tool", "script"] });
  try {
    await initialize(c);
    const { sessionId } = await newSession(c, ws.root);
    const r = await c.agent.request(acp.methods.agent.session.setConfigOption, {
      sessionId,
      configId: "model",
      value: "questions",
    });
    assert.equal(r.configOptions.find((o) => o.id === "model").currentValue, "questions");
    await assert.rejects(
      c.agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: "code" }),
      /one mode/,
    );
    await c.agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: "plan" });
    // The plan's open questions, with no elicitation and no single choice, end the turn as text;
    // the next prompt answers them.
    const first = await prompt(c, sessionId, "Questions");
    assert.equal(first.stopReason, "end_turn");
    assert.match(agentText(of(c.updates, sessionId)), /The planner asks:/);
    const second = await prompt(c, sessionId, "Hello, planwire! And yes, add a test.");
    assert.equal(second.stopReason, "end_turn");
    const prompts = stdinLines(ws);
    assert.deepEqual(prompts, [], "the questions script is not interactive");
    const list = await c.agent.request(acp.methods.agent.session.list, {});
    assert.equal(list.sessions.length, 1);
  } finally {
    assert.equal((await c.stop()).code, 0);
  }
  assert.deepEqual(invalid, []);
});
