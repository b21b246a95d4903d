"""`planwire mcp` driven by the official MCP Python SDK (`mcp`, pinned in requirements.txt),
with the `script` planner (recorded Claude Code streams replayed as real child processes).

Run with tests/mcp/run.sh, which installs the SDK into .cache/mcp-py and sets PLANWIRE_BIN.
The SDK's own client negotiates (mode "auto": a `server/discover` probe, then `initialize`),
validates every tool result's structuredContent against the tool's outputSchema, and sends
`notifications/cancelled` when a call is abandoned.
"""

import os
import sqlite3
import tempfile
import time
from pathlib import Path

import anyio
import jsonschema
import pytest
from mcp import types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

BIN = os.environ.get("PLANWIRE_BIN") or pytest.skip("PLANWIRE_BIN is not set (run tests/mcp/run.sh)", allow_module_level=True)
# Deadlines only bound a hang: the machine may be slow and busy.
DEADLINE = 120


class Workspace:
    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="planwire-mcp-py-"))
        self.root = self.dir / "project"
        (self.root / "src").mkdir(parents=True)
        (self.root / "src" / "main.rs").write_text('fn main() {\n    println!("hello");\n}\n')
        self.db = self.dir / "planwire.db"
        self.stdin_log = self.dir / "stdin.log"

    def params(self, model="demo"):
        return StdioServerParameters(
            command=BIN,
            args=["mcp", "--db", str(self.db), "--tool", "script", "--model", model],
            env={"PLANWIRE_LOG": "warn", "PLANWIRE_REPLAY_STDIN_LOG": str(self.stdin_log)},
            cwd=str(self.root),
        )

    def stdin_lines(self):
        return self.stdin_log.read_text().splitlines() if self.stdin_log.exists() else []

    def run_group(self, run):
        """The run's process group, once its planner has started (else None)."""
        if not self.db.exists():
            return None
        with sqlite3.connect(self.db) as c:
            row = c.execute("SELECT pgid FROM runs WHERE id = ?", (run,)).fetchone()
        return row[0] if row else None


def group_members(pgid):
    """Processes whose process group is `pgid` (zombies included: they are not reaped yet)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid:
            members.append(int(entry))
    return members


def run(main):
    anyio.run(main)


def text_of(result):
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def tool(client, name, arguments, **kw):
    with anyio.fail_after(DEADLINE):
        return await client.call_tool(name, arguments, **kw)


def test_initialize_negotiates_2025_11_25_and_every_tool_has_valid_schemas():
    ws = Workspace()

    async def main():
        async with Client(ws.params()) as client:
            assert client.protocol_version == "2025-11-25"
            assert client.server_info.name == "planwire"
            caps = client.server_capabilities
            assert caps.tools is not None
            assert caps.resources.subscribe is True
            listed = await client.list_tools()
            names = [t.name for t in listed.tools]
            assert names == [
                "create_ticket", "plan", "get_plan", "list_tickets", "get_ticket",
                "answer", "stop", "breakdown", "export_plan", "handoff",
            ]
            for t in listed.tools:
                jsonschema.Draft202012Validator.check_schema(t.input_schema)
                jsonschema.Draft202012Validator.check_schema(t.output_schema)
                assert t.input_schema["type"] == "object" and t.output_schema["type"] == "object", t.name
                assert t.title and t.annotations.title == t.title, t.name
                assert t.annotations.destructive_hint is False, t.name
                read_only = t.name in ("get_plan", "list_tickets", "get_ticket")
                assert t.annotations.read_only_hint is read_only, t.name
            plan = next(t for t in listed.tools if t.name == "plan")
            assert plan.input_schema["required"] == ["ticketId"]
            assert client.instructions and "create_ticket" in client.instructions

    run(main)


def test_create_then_plan_reports_progress_and_returns_the_plan_as_markdown_and_structured_content():
    ws = Workspace()

    async def roots(_ctx):
        return types.ListRootsResult(roots=[types.Root(uri=ws.root.as_uri(), name="project")])

    async def main():
        progress = []

        async def on_progress(value, total, message):
            progress.append((value, message))

        async with Client(ws.params(), list_roots_callback=roots) as client:
            created = await tool(client, "create_ticket", {"title": "Change the greeting"})
            assert not created.is_error, text_of(created)
            ticket = created.structured_content["ticket"]
            # No root given: the client's first root.
            assert Path(ticket["root"]) == ws.root.resolve()
            assert ticket["status"] == "draft"
            result = await tool(client, "plan", {"ticketId": ticket["id"]}, progress_callback=on_progress)
            assert not result.is_error, text_of(result)
            # The SDK validated structuredContent against the outputSchema; so does this.
            schema = next(t for t in (await client.list_tools()).tools if t.name == "plan").output_schema
            jsonschema.validate(result.structured_content, schema)
            out = result.structured_content
            assert out["status"] == "planned"
            assert out["version"] == 1
            assert out["plan"]["title"] == "Change the greeting printed by main"
            assert out["plan"]["acceptanceCriteria"]
            text = text_of(result)
            assert "# Change the greeting printed by main" in text and "<planwire-plan>" not in text
            messages = [m for _, m in progress]
            assert messages[0] == f"Planning ticket {ticket['id']}", messages
            assert any(m.startswith("Read") for m in messages), messages
            values = [v for v, _ in progress]
            assert values == sorted(values) and len(set(values)) == len(values), values
            got = await tool(client, "get_plan", {"ticketId": ticket["id"]})
            assert got.structured_content["version"] == 1
            assert got.structured_content["markdown"] == text_of(got)
            listed = await tool(client, "list_tickets", {})
            assert [t["status"] for t in listed.structured_content["tickets"]] == ["planned"]
            shown = await tool(client, "get_ticket", {"ticketId": ticket["id"]})
            runs = shown.structured_content["runs"]
            assert runs[0]["status"] == "completed" and runs[0]["timing"]["totalMs"] >= 0
            assert runs[0]["sandbox"] in ("enforced", "unavailable")

    run(main)


def test_a_live_question_is_answered_through_elicitation_in_the_same_run():
    ws = Workspace()
    asked = []

    async def elicit(_ctx, params):
        asked.append(params)
        return types.ElicitResult(action="accept", content={"q01": "Hi there"})

    async def main():
        async with Client(ws.params("ask"), elicitation_callback=elicit) as client:
            ticket = (await tool(client, "create_ticket", {"title": "Pick a greeting", "root": str(ws.root)})).structured_content["ticket"]
            result = await tool(client, "plan", {"ticketId": ticket["id"]})
            assert not result.is_error, text_of(result)
            assert result.structured_content["status"] == "planned", result.structured_content
            assert len(asked) == 1
            form = asked[0]
            assert form.mode == "form"
            q01 = form.requested_schema["properties"]["q01"]
            assert [o["const"] for o in q01["oneOf"]] == ["Hello, world (Recommended)", "Hi there"]
            # The answer reached the waiting planner: the same run went on to its plan.
            answers = [l for l in ws.stdin_lines() if "control_response" in l and "Hi there" in l]
            assert len(answers) == 1, ws.stdin_lines()
            assert result.structured_content["runId"] == 1

    run(main)


def test_a_declined_elicitation_is_a_dismissal():
    ws = Workspace()

    async def decline(_ctx, _params):
        return types.ElicitResult(action="decline")

    async def main():
        async with Client(ws.params("ask"), elicitation_callback=decline) as client:
            ticket = (await tool(client, "create_ticket", {"title": "Pick a greeting", "root": str(ws.root)})).structured_content["ticket"]
            result = await tool(client, "plan", {"ticketId": ticket["id"]})
            assert result.structured_content["status"] == "planned", text_of(result)
            shown = await tool(client, "get_ticket", {"ticketId": ticket["id"]})
            assert shown.structured_content["ticket"]["openQuestions"] == []
        with sqlite3.connect(ws.db) as c:
            assert [r[0] for r in c.execute("SELECT status FROM questions")] == ["dismissed"]

    run(main)


def test_without_elicitation_plan_returns_needs_input_and_answer_continues_the_run():
    ws = Workspace()

    async def main():
        async with Client(ws.params("ask")) as client:
            ticket = (await tool(client, "create_ticket", {"title": "Pick a greeting", "root": str(ws.root)})).structured_content["ticket"]
            first = await tool(client, "plan", {"ticketId": ticket["id"]})
            out = first.structured_content
            assert out["status"] == "needs_input", out
            q = out["questions"][0]
            assert q["source"] == "live" and q["status"] == "open"
            assert q["items"][0]["options"][1]["label"] == "Hi there"
            assert f"Question {q['id']}" in text_of(first)
            # The run waits for the answer meanwhile.
            shown = await tool(client, "get_ticket", {"ticketId": ticket["id"]})
            assert shown.structured_content["runs"][0]["status"] == "running"
            second = await tool(client, "answer", {"ticketId": ticket["id"], "questionId": q["id"], "answers": ["hi THERE"]})
            assert second.structured_content["status"] == "planned", text_of(second)
            assert second.structured_content["runId"] == out["runId"], "the same run went on"
            assert any("control_response" in l and "Hi there" in l for l in ws.stdin_lines())

    run(main)


def test_a_cancelled_plan_leaves_no_process_behind():
    ws = Workspace()

    async def main():
        async with Client(ws.params("slow")) as client:
            ticket = (await tool(client, "create_ticket", {"title": "Slow one", "root": str(ws.root)})).structured_content["ticket"]
            async with anyio.create_task_group() as tg:

                async def call():
                    await client.call_tool("plan", {"ticketId": ticket["id"]})

                tg.start_soon(call)
                # The slow script prints text for a minute: stop it while it runs.
                with anyio.fail_after(DEADLINE):
                    while not (pgid := ws.run_group(1)):
                        await anyio.sleep(0.05)
                assert group_members(pgid), "the planner runs"
                # Abandoning the call: the SDK sends notifications/cancelled.
                tg.cancel_scope.cancel()
            with anyio.fail_after(DEADLINE):
                while True:
                    shown = await client.call_tool("get_ticket", {"ticketId": ticket["id"]})
                    if shown.structured_content["runs"][0]["status"] != "running":
                        break
                    await anyio.sleep(0.1)
            assert shown.structured_content["runs"][0]["status"] == "cancelled"
            assert shown.structured_content["ticket"]["status"] == "stopped"
            assert group_members(pgid) == [], "no process of the planner's group is left"
            # The server is still up.
            assert (await client.list_tools()).tools

    run(main)


# The SDK warns that 2026-07-28 replaced resources/subscribe; this connection is 2025-11-25.
@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")
def test_plans_are_resources_and_a_subscription_hears_of_a_new_version():
    ws = Workspace()
    updates = []

    async def on_message(message):
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(message.params.uri)

    async def main():
        async with Client(ws.params(), message_handler=on_message) as client:
            ticket = (await tool(client, "create_ticket", {"title": "Change the greeting", "root": str(ws.root)})).structured_content["ticket"]
            await tool(client, "plan", {"ticketId": ticket["id"]})
            uri = f"planwire://ticket/{ticket['id']}/plan"
            # No roots: the server's working directory (the project) is the root.
            listed = await client.list_resources()
            assert [str(r.uri) for r in listed.resources] == [uri]
            assert listed.resources[0].mime_type == "text/markdown"
            templates = await client.list_resource_templates()
            assert sorted(t.uri_template for t in templates.resource_templates) == [
                "planwire://ticket/{id}/plan",
                "planwire://ticket/{id}/plan/{version}",
            ]
            read = await client.read_resource(uri)
            assert read.contents[0].text.startswith("# Change the greeting printed by main")
            await client.subscribe_resource(uri)
            again = await tool(client, "plan", {"ticketId": ticket["id"], "feedback": "Also print it in French."})
            assert again.structured_content["version"] == 2, text_of(again)
            with anyio.fail_after(DEADLINE):
                while uri not in updates:
                    await anyio.sleep(0.05)
            v1 = await client.read_resource(f"{uri}/1")
            assert v1.contents[0].text == read.contents[0].text
            with pytest.raises(MCPError) as e:
                await client.read_resource(f"{uri}/9")
            assert e.value.error.code == -32002

    run(main)


def test_bad_input_gets_mcp_errors_and_the_server_stays_up():
    ws = Workspace()

    async def main():
        async with Client(ws.params()) as client:
            with pytest.raises(MCPError) as e:
                await client.call_tool("implement_everything", {})
            assert e.value.error.code == -32602
            wrong = await tool(client, "get_ticket", {"ticketId": "one"})
            assert wrong.is_error and "ticketId" in text_of(wrong)
            unknown = await tool(client, "get_ticket", {"ticketId": 999})
            assert unknown.is_error and "999" in text_of(unknown)
            big = await tool(client, "create_ticket", {"title": "x" * 5000, "root": str(ws.root)})
            assert big.is_error and "`title`" in text_of(big)
            extra = await tool(client, "stop", {"ticketId": 1, "force": True})
            assert extra.is_error and "force" in text_of(extra)
            with pytest.raises(MCPError) as e:
                await client.read_resource("planwire://ticket/999/plan")
            assert e.value.error.code == -32002
            assert len((await client.list_tools()).tools) == 10

    run(main)
