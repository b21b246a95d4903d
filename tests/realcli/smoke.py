#!/usr/bin/env python3
"""Real-CLI smoke tests: the pinned real CLIs against planwire's own mock model server.

    tests/realcli/smoke.py [--keep] [-k SUBSTRING ...]

Runs tests/realcli/install.sh first (cached; exit 3 = the tier is unavailable, passed through).
Each test gets a fresh temp dir holding an isolated HOME, a scratch git repo and the mock's
request log; --keep (or a failure) leaves it on disk and prints its path.
The last line is `N passed, N failed`. Exit 0 when nothing failed.
"""

import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MOCK = os.path.join(HERE, "mock_model.py")

PLAN = ('<planwire-plan>{"title":"T","description":"D","acceptanceCriteria":["a"],'
        '"openQuestions":[],"dependencies":[]}</planwire-plan>')
FINAL_TEXT = "Here is the plan.\n\n" + PLAN
PROMPT = "Plan a change to the greeting. End with the plan in <planwire-plan> tags."


# ---------------------------------------------------------------------------------------------
# plumbing
# ---------------------------------------------------------------------------------------------
class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


class Mock:
    """Our mock_model.py in a subprocess, with its own script and request log."""

    def __init__(self, workdir, script):
        self.script_path = os.path.join(workdir, "mock.script.json")
        self.log_path = os.path.join(workdir, "mock.requests.jsonl")
        with open(self.script_path, "w") as f:
            json.dump(script, f, indent=1)
        self.stderr = open(os.path.join(workdir, "mock.stderr.txt"), "w")
        self.proc = subprocess.Popen([sys.executable, MOCK, "--script", self.script_path, "--log", self.log_path,
                                      "--port", "0"], stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        line = self.proc.stdout.readline()
        check(line.startswith("PORT "), f"mock did not print PORT: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def requests(self, fmt=None):
        out = []
        if os.path.exists(self.log_path):
            with open(self.log_path) as f:
                out = [json.loads(l) for l in f if l.strip()]
        return [r for r in out if fmt is None or r["format"] == fmt]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


def make_workspace(tmp):
    """Isolated HOME/XDG dirs and a scratch git repo with a couple of files."""
    home = os.path.join(tmp, "home")
    repo = os.path.join(tmp, "repo")
    os.makedirs(os.path.join(repo, "src"))
    os.makedirs(home)
    with open(os.path.join(repo, "README.md"), "w") as f:
        f.write("# demo\n\nPrints a greeting.\n")
    with open(os.path.join(repo, "src", "main.rs"), "w") as f:
        f.write('fn main() {\n    println!("Hello, world");\n}\n')
    subprocess.run(["git", "init", "-q", repo], check=True)
    return home, repo


def base_env(home):
    """A clean env: nothing of the caller's (API keys, XDG, CLAUDE_*/CODEX_*/OPENCODE_*) leaks in."""
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": home,
        "LANG": "C.UTF-8",
        "SHELL": "/bin/bash",
        "TERM": "dumb",
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_STATE_HOME": os.path.join(home, ".local", "state"),
    }


def run_cli(tmp, name, argv, env, cwd, stdin_text=None, timeout=120):
    """Run a CLI to completion. stdin is /dev/null, or a pipe that gets stdin_text then EOF."""
    t0 = time.time()
    with open(os.path.join(tmp, f"{name}.args.txt"), "w") as f:
        f.write("cwd: %s\nenv:\n%s\nargv:\n%s\n" % (cwd, "\n".join(f"  {k}={v}" for k, v in sorted(env.items())),
                                                     json.dumps(argv)))
    try:
        p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                           input=stdin_text, stdin=None if stdin_text is not None else subprocess.DEVNULL)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), \
            (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    wall = time.time() - t0
    with open(os.path.join(tmp, f"{name}.stdout.jsonl"), "w") as f:
        f.write(out)
    with open(os.path.join(tmp, f"{name}.stderr.txt"), "w") as f:
        f.write(err)
    lines = []
    for l in out.splitlines():
        if l.strip():
            try:
                lines.append(json.loads(l))
            except ValueError:
                raise Fail(f"non-JSON stdout line: {l[:200]!r}")
    return rc, lines, err, wall


def tail(s, n=600):
    return s[-n:].replace("\n", "\n      ")


# ---------------------------------------------------------------------------------------------
# Claude Code
# ---------------------------------------------------------------------------------------------
def claude_env(home, mock):
    env = base_env(home)
    env.update({
        "ANTHROPIC_BASE_URL": mock.url,
        "ANTHROPIC_API_KEY": "sk-ant-mock",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_MAX_RETRIES": "1",
        "GIT_CEILING_DIRECTORIES": os.path.dirname(os.path.dirname(home)),
    })
    return env


def test_claude_plain(tmp, bins):
    home, repo = make_workspace(tmp)
    mock = Mock(tmp, {"turns": [{"thinking": "Let me think.", "text": FINAL_TEXT}]})
    try:
        argv = [bins["CLAUDE_BIN"], "-p", "--output-format", "stream-json", "--verbose",
                "--permission-mode", "plan", PROMPT]
        rc, lines, err, wall = run_cli(tmp, "claude", argv, claude_env(home, mock), repo)
    finally:
        mock.stop()
    check(rc == 0, f"exit {rc}; stderr: {tail(err)}")
    check(lines and lines[0].get("type") == "system" and lines[0].get("subtype") == "init", "first line is not system/init")
    check(lines[0].get("permissionMode") == "plan", f"permissionMode {lines[0].get('permissionMode')}")
    res = lines[-1]
    check(res.get("type") == "result" and res.get("is_error") is False, f"last line not a good result: {str(res)[:300]}")
    check(PLAN in res.get("result", ""), "plan text missing from result.result")
    texts = [b.get("text", "") for l in lines if l.get("type") == "assistant" for b in l["message"]["content"]]
    check(any(PLAN in t for t in texts), "plan text missing from assistant lines")
    reqs = mock.requests("anthropic")
    check(len(reqs) == 1 and reqs[0]["path"].startswith("/v1/messages"), f"{len(reqs)} model requests")
    check(any(r["method"] == "HEAD" for r in mock.requests()), "no HEAD / probe seen (notes say there is one)")
    return f"{len(lines)} lines, {wall:.1f}s"


def test_claude_ask_sdk(tmp, bins):
    """Bidirectional mode: AskUserQuestion -> control_request -> our control_response -> next request."""
    home, repo = make_workspace(tmp)
    question = "Which greeting should the program print?"
    answer = "Hi there"
    ask_input = {"questions": [{"question": question, "header": "Greeting", "multiSelect": False, "options": [
        {"label": "Hello, world (Recommended)", "description": "Classic greeting"},
        {"label": answer, "description": "Informal greeting"}]}]}
    mock = Mock(tmp, {"turns": [
        {"blocks": [{"text": "Before planning I need one decision."},
                    {"tool": "AskUserQuestion", "id": "toolu_ask_0001", "input": ask_input}]},
        # picked only when the answer reached the model; otherwise the script is exhausted
        {"match": f'\\"{question}\\"=\\"{answer}\\"', "text": FINAL_TEXT},
    ]})
    argv = [bins["CLAUDE_BIN"], "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
            "--permission-mode", "plan", "--permission-prompt-tool", "stdio"]
    env = claude_env(home, mock)
    with open(os.path.join(tmp, "claude_sdk.args.txt"), "w") as f:
        f.write(json.dumps({"argv": argv, "env": env, "cwd": repo}, indent=1))
    t0 = time.time()
    proc = subprocess.Popen(argv, env=env, cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1)
    q = queue.Queue()
    threading.Thread(target=lambda: [q.put(l) for l in proc.stdout] + [q.put(None)], daemon=True).start()
    errbuf = []
    threading.Thread(target=lambda: errbuf.extend(proc.stderr), daemon=True).start()
    sent, lines, control_requests = [], [], []

    def send(obj):
        sent.append(obj)
        proc.stdin.write(json.dumps(obj) + "\n")
        proc.stdin.flush()

    try:
        send({"type": "control_request", "request_id": "req_init_1", "request": {"subtype": "initialize", "hooks": None}})
        send({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": PROMPT}]},
              "parent_tool_use_id": None, "session_id": ""})
        deadline = time.time() + 90
        while True:
            try:
                raw = q.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                raise Fail("timed out waiting for the CLI")
            if raw is None:
                break
            msg = json.loads(raw)
            lines.append(msg)
            if msg.get("type") == "control_request":
                req = msg["request"]
                control_requests.append(req)
                if req.get("subtype") == "can_use_tool" and req.get("tool_name") == "AskUserQuestion":
                    upd = dict(req["input"], answers={req["input"]["questions"][0]["question"]: answer})
                    send({"type": "control_response", "response": {"subtype": "success", "request_id": msg["request_id"],
                                                                   "response": {"behavior": "allow", "updatedInput": upd}}})
                else:  # planwire denies everything else
                    send({"type": "control_response", "response": {"subtype": "success", "request_id": msg["request_id"],
                          "response": {"behavior": "deny", "message": "Denied by planwire smoke test.", "interrupt": False}}})
            if msg.get("type") == "result":
                proc.stdin.close()  # ends the session: the CLI exits after EOF on stdin
        rc = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        mock.stop()
        with open(os.path.join(tmp, "claude_sdk.stdout.jsonl"), "w") as f:
            f.writelines(json.dumps(l) + "\n" for l in lines)
        with open(os.path.join(tmp, "claude_sdk.stdin.jsonl"), "w") as f:
            f.writelines(json.dumps(l) + "\n" for l in sent)
        with open(os.path.join(tmp, "claude_sdk.stderr.txt"), "w") as f:
            f.write("".join(errbuf))
    wall = time.time() - t0
    check(rc == 0, f"exit {rc}; stderr: {tail(''.join(errbuf))}")
    asks = [r for r in control_requests if r.get("subtype") == "can_use_tool" and r.get("tool_name") == "AskUserQuestion"]
    check(len(asks) == 1, f"expected one AskUserQuestion control_request, got {control_requests}")
    check(asks[0]["input"]["questions"][0]["question"] == question, "question text differs")
    reqs = mock.requests("anthropic")
    check(len(reqs) == 2, f"expected 2 model requests, got {len(reqs)}")
    check(reqs[1]["turn"] == 1, "second request did not match the answer turn")
    blob = json.dumps(reqs[1]["body"]["messages"])
    check(answer in blob and "Your questions have been answered" in blob, "answer missing from the next model request")
    tr = [c for l in lines if l.get("type") == "user" for c in l["message"]["content"]
          if isinstance(c, dict) and c.get("type") == "tool_result"]
    check(tr and answer in json.dumps(tr[0]["content"]), "tool_result line does not carry the answer")
    res = lines[-1]
    check(res.get("type") == "result" and res.get("is_error") is False and PLAN in res.get("result", ""),
          f"bad result: {str(res)[:300]}")
    return f"control_request answered, answer in request #2, {wall:.1f}s"


def test_claude_sigterm_midstream(tmp, bins):
    """Slow stream (chunk_delay_ms): SIGTERM after the first text delta -> exit 143, no result line."""
    home, repo = make_workspace(tmp)
    mock = Mock(tmp, {"turns": [{"text": "x" * 400 + FINAL_TEXT, "chunk_size": 8, "chunk_delay_ms": 100}]})
    argv = [bins["CLAUDE_BIN"], "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "plan",
            "--include-partial-messages", PROMPT]
    t0 = time.time()
    proc = subprocess.Popen(argv, env=claude_env(home, mock), cwd=repo, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines, killed_at = [], None
    try:
        for raw in proc.stdout:
            msg = json.loads(raw)
            lines.append(msg)
            ev = msg.get("event", {}) if msg.get("type") == "stream_event" else {}
            if killed_at is None and ev.get("type") == "content_block_delta":
                proc.terminate()
                killed_at = time.time() - t0
        rc = proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        mock.stop()
    check(killed_at is not None, "never saw a text delta")
    check(rc == 143, f"exit {rc} (expected 143)")
    check(not any(l.get("type") == "result" for l in lines), "a result line after SIGTERM")
    return f"SIGTERM at {killed_at:.1f}s, exit {rc}, {len(lines)} lines"


def test_claude_auth_fail_fast(tmp, bins):
    """401 with CLAUDE_CODE_MAX_RETRIES=0: one request, is_error result, exit 1, quickly."""
    home, repo = make_workspace(tmp)
    mock = Mock(tmp, {"turns": [{"error": {"status": 401, "message": "invalid x-api-key"}, "repeat": -1}]})
    env = claude_env(home, mock)
    env["CLAUDE_CODE_MAX_RETRIES"] = "0"
    try:
        argv = [bins["CLAUDE_BIN"], "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "plan", PROMPT]
        rc, lines, err, wall = run_cli(tmp, "claude", argv, env, repo, timeout=60)
    finally:
        mock.stop()
    check(rc == 1, f"exit {rc}")
    res = lines[-1] if lines else {}
    check(res.get("type") == "result" and res.get("is_error") is True and res.get("api_error_status") == 401,
          f"bad result {str(res)[:300]}")
    n = len(mock.requests("anthropic"))
    check(n == 1, f"{n} requests (expected 1 with MAX_RETRIES=0)")
    return f"{n} request, {wall:.1f}s: {res.get('result', '')[:60]!r}"


# ---------------------------------------------------------------------------------------------
# OpenCode
# ---------------------------------------------------------------------------------------------
READONLY_BASH = {
    "*": "deny",
    "ls": "allow", "ls *": "allow", "pwd": "allow", "cat *": "allow", "head *": "allow", "tail *": "allow",
    "wc *": "allow", "rg *": "allow", "grep *": "allow", "find *": "allow", "tree *": "allow",
    "git status*": "allow", "git diff*": "allow", "git log*": "allow", "git show*": "allow",
    "git branch": "allow", "git ls-files*": "allow", "git rev-parse*": "allow",
}


READONLY_PERMISSION = {
    "edit": "deny",  # covers edit/write/patch
    "webfetch": "deny",
    "external_directory": "deny",  # "ask" would be auto-rejected by `run` and END the run
    "bash": READONLY_BASH,
}


def opencode_config(mock):
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {"mock": {
            "npm": "@ai-sdk/openai-compatible", "name": "Mock",
            "options": {"baseURL": mock.url + "/v1", "apiKey": "sk-mock"},
            "models": {"mock-model": {"name": "Mock Model", "limit": {"context": 128000, "output": 8192}}}}},
        "model": "mock/mock-model",
        "small_model": "mock/mock-model",
        "autoupdate": False,
        "share": "disabled",
        # Top-level `permission` (all agents, subagents included) AND the plan agent's own:
        # `agent.plan.permission` alone does not reach the explore subagent (its `touch` ran).
        "permission": READONLY_PERMISSION,
        "agent": {"plan": {"permission": READONLY_PERMISSION}},
    }


def opencode_env(tmp, home, repo, mock):
    cfg = os.path.join(tmp, "opencode.config.json")
    with open(cfg, "w") as f:
        json.dump(opencode_config(mock), f, indent=1)
    env = base_env(home)
    env.update({
        "PWD": repo,  # opencode uses $PWD, not getcwd()
        "OPENCODE_CONFIG": cfg,
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        # opencode fetches @opencode-ai/plugin metadata from the npm registry in the background
        # on every fresh HOME (19 MB into ~/.npm). Point it at the mock (404, logged) so the tier
        # stays on 127.0.0.1. Not needed in production.
        "npm_config_registry": mock.url + "/npm/",
    })
    return env


def opencode_texts(lines):
    return [l["part"]["text"] for l in lines if l.get("type") == "text"]


def test_opencode_plain(tmp, bins):
    home, repo = make_workspace(tmp)
    mock = Mock(tmp, {"turns": [
        {"match": "You are a title generator", "text": "Greeting plan", "repeat": -1},
        {"text": FINAL_TEXT},
    ]})
    try:
        argv = [bins["OPENCODE_BIN"], "run", "--agent", "plan", "--format", "json", "--model", "mock/mock-model",
                "--title", "T"]
        rc, lines, err, wall = run_cli(tmp, "opencode", argv, opencode_env(tmp, home, repo, mock), repo,
                                       stdin_text=PROMPT, timeout=180)
    finally:
        mock.stop()
    check(rc == 0, f"exit {rc}; stderr: {tail(err)}")
    check(not any(l.get("type") == "error" for l in lines), "error event on stdout")
    check(any(PLAN in t for t in opencode_texts(lines)), "plan text missing from text events")
    fin = [l for l in lines if l.get("type") == "step_finish"]
    check(fin and fin[-1]["part"].get("reason") == "stop", "last step_finish reason is not stop")
    reqs = mock.requests("chat")
    check(len(reqs) == 1, f"{len(reqs)} requests (--title should suppress the title request)")
    body = json.dumps(reqs[0]["body"])
    user_msgs = [m for m in reqs[0]["body"]["messages"] if m["role"] == "user"]
    check(PROMPT in json.dumps(user_msgs), "prompt (sent on stdin) missing from the request")
    check(repo in body, "repo dir not in the system prompt (PWD not honoured?)")
    return f"{len(lines)} lines, {wall:.1f}s"


def test_opencode_readonly_bash(tmp, bins):
    """Plan agent with our permission rules: `touch` is denied, `git status` runs, run continues."""
    home, repo = make_workspace(tmp)
    mock = Mock(tmp, {"turns": [
        {"match": "You are a title generator", "text": "Greeting plan", "repeat": -1},
        {"text": "Checking the repo.", "tool_calls": [
            {"name": "bash", "id": "call_touch", "input": {"command": "touch should_not_exist.txt",
                                                            "description": "Create a file"}},
            {"name": "bash", "id": "call_git", "input": {"command": "git status --short",
                                                          "description": "Show git status"}}]},
        {"text": FINAL_TEXT},
    ]})
    try:
        argv = [bins["OPENCODE_BIN"], "run", "--agent", "plan", "--format", "json", "--model", "mock/mock-model"]
        rc, lines, err, wall = run_cli(tmp, "opencode", argv, opencode_env(tmp, home, repo, mock), repo,
                                       stdin_text=PROMPT, timeout=180)
    finally:
        mock.stop()
    check(rc == 0, f"exit {rc}; stderr: {tail(err)}")
    tools = {l["part"]["callID"]: l["part"]["state"] for l in lines if l.get("type") == "tool_use"}
    check(set(tools) == {"call_touch", "call_git"}, f"tool_use events: {list(tools)}")
    check(tools["call_touch"]["status"] == "error", f"touch was not denied: {tools['call_touch']}")
    check(tools["call_git"]["status"] == "completed", f"git status did not run: {tools['call_git']}")
    check(not os.path.exists(os.path.join(repo, "should_not_exist.txt")), "touch created the file!")
    check(any(PLAN in t for t in opencode_texts(lines)), "plan text missing")
    reqs = mock.requests("chat")
    titles = [r for r in reqs if r["turn"] == 0]
    check(len(titles) == 1, f"expected one title request routed by match, got {len(titles)}")
    check(len(reqs) == 3, f"{len(reqs)} requests (title + 2 turns expected)")
    return f"touch denied: {tools['call_touch'].get('error', '')[:70]!r}; {wall:.1f}s"


def test_opencode_subagent_readonly(tmp, bins):
    """`task` -> explore subagent, which tries `touch`: the read-only rules must hold there too."""
    home, repo = make_workspace(tmp)
    marker = "SUBAGENT-7f3a: find where the greeting is printed"
    mock = Mock(tmp, {"turns": [
        {"match": "You are a title generator", "text": "Greeting plan", "repeat": -1},
        # the child's requests carry the marker (its prompt); listed first so they win over the
        # main thread's later request, which also contains the marker inside the task call
        {"match": marker, "text": "Child: looking.", "tool_calls": [
            {"name": "bash", "id": "call_child_touch", "input": {"command": "touch child_was_here.txt",
                                                                  "description": "Create a file"}},
            {"name": "read", "id": "call_child_read", "input": {"filePath": os.path.join(repo, "src", "main.rs")}}]},
        {"match": marker, "text": "CHILD REPORT: the greeting is printed in src/main.rs:2."},
        {"text": "Delegating.", "tool_calls": [
            {"name": "task", "id": "call_task", "input": {"description": "Find greeting", "prompt": marker,
                                                           "subagent_type": "explore"}}]},
        {"text": FINAL_TEXT},
    ]})
    try:
        argv = [bins["OPENCODE_BIN"], "run", "--agent", "plan", "--format", "json", "--model", "mock/mock-model",
                "--title", "T"]
        rc, lines, err, wall = run_cli(tmp, "opencode", argv, opencode_env(tmp, home, repo, mock), repo,
                                       stdin_text=PROMPT, timeout=180)
    finally:
        mock.stop()
    check(rc == 0, f"exit {rc}; stderr: {tail(err)}")
    tools = {l["part"]["callID"]: l["part"] for l in lines if l.get("type") == "tool_use"}
    check(list(tools) == ["call_task"], f"only the task call should be on stdout, got {list(tools)}")
    st = tools["call_task"]["state"]
    check(st["status"] == "completed" and "CHILD REPORT" in st.get("output", ""), f"task state {str(st)[:300]}")
    check(st.get("metadata", {}).get("sessionId", "").startswith("ses_"), "no child session id in metadata")
    check(not os.path.exists(os.path.join(repo, "child_was_here.txt")), "the subagent's touch created the file!")
    child2 = [r for r in mock.requests("chat") if r["turn"] == 2]
    check(child2, "the child's second request never came")
    tool_msgs = {m.get("tool_call_id"): json.dumps(m.get("content")) for m in child2[0]["body"]["messages"]
                 if m.get("role") == "tool"}
    check("prevents you from using this specific tool call" in tool_msgs.get("call_child_touch", ""),
          f"child's touch result: {tool_msgs.get('call_child_touch', '')[:200]}")
    check(any(PLAN in t for t in opencode_texts(lines)), "plan text missing")
    return f"child {st['metadata']['sessionId']}, child touch denied, {wall:.1f}s"


# ---------------------------------------------------------------------------------------------
# Codex
# ---------------------------------------------------------------------------------------------
CODEX_MODEL = "gpt-5.5"  # a slug from the bundled catalog: no "Model metadata not found" warning item


def codex_env(tmp, home, base_url):
    codex_home = os.path.join(tmp, "codex-home")
    os.makedirs(codex_home, exist_ok=True)
    with open(os.path.join(codex_home, "config.toml"), "w") as f:
        f.write(f'''model = "{CODEX_MODEL}"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[features]
daemon_auto_start = false
unbounded_connection_retries = false

[model_providers.mock]
name = "Mock"
base_url = "{base_url}"
wire_api = "responses"
env_key = "PLANWIRE_MOCK_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 20000
''')
    env = base_env(home)
    env.update({"CODEX_HOME": codex_home, "PLANWIRE_MOCK_API_KEY": "sk-mock"})
    return env


def codex_argv(bins):
    return [bins["CODEX_BIN"], "exec", "--json", "--sandbox", "read-only", "--disable", "unbounded_connection_retries",
            "-m", CODEX_MODEL, "-"]


def test_codex_plain(tmp, bins):
    home, repo = make_workspace(tmp)
    mock = Mock(tmp, {"turns": [{"thinking": "Let me think.", "text": FINAL_TEXT}]})
    try:
        rc, lines, err, wall = run_cli(tmp, "codex", codex_argv(bins), codex_env(tmp, home, mock.url + "/v1"), repo,
                                       stdin_text=PROMPT, timeout=120)
    finally:
        mock.stop()
    check(rc == 0, f"exit {rc}; stderr: {tail(err)}")
    check(lines and lines[0].get("type") == "thread.started", "first line is not thread.started")
    msgs = [l["item"]["text"] for l in lines if l.get("type") == "item.completed"
            and l["item"].get("type") == "agent_message"]
    check(any(PLAN in m for m in msgs), "plan text missing from agent_message items")
    check(lines[-1].get("type") == "turn.completed", f"last line {lines[-1].get('type')}")
    warn = [l["item"]["message"] for l in lines if l.get("type") == "item.completed" and l["item"].get("type") == "error"]
    reqs = mock.requests("responses")
    check(len(reqs) == 1 and PROMPT in json.dumps(reqs[0]["body"]), "prompt not in the one model request")
    return f"{len(lines)} lines, {len(warn)} warning items, {wall:.1f}s"


def test_codex_connrefused_fails_fast(tmp, bins):
    """Nothing listening: with --disable unbounded_connection_retries + retries 0 it must fail, not hang."""
    home, repo = make_workspace(tmp)
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # a port that was free a moment ago and has no listener
    rc, lines, err, wall = run_cli(tmp, "codex", codex_argv(bins), codex_env(tmp, home, f"http://127.0.0.1:{port}/v1"),
                                   repo, stdin_text=PROMPT, timeout=60)
    check(rc == 1, f"exit {rc} after {wall:.1f}s")
    check(lines and lines[-1].get("type") == "turn.failed", f"last line {lines[-1] if lines else None}")
    check(wall < 20, f"took {wall:.1f}s")
    return f"turn.failed {lines[-1]['error']['message'][:50]!r} in {wall:.1f}s"


def test_codex_auth_401(tmp, bins):
    home, repo = make_workspace(tmp)
    mock = Mock(tmp, {"turns": [{"error": {"status": 401, "message": "Incorrect API key provided: sk-mock."},
                                 "repeat": -1}]})
    try:
        rc, lines, err, wall = run_cli(tmp, "codex", codex_argv(bins), codex_env(tmp, home, mock.url + "/v1"), repo,
                                       stdin_text=PROMPT, timeout=60)
    finally:
        mock.stop()
    check(rc == 1, f"exit {rc}")
    check(lines and lines[-1].get("type") == "turn.failed" and "401" in lines[-1]["error"]["message"],
          f"last line {lines[-1] if lines else None}")
    n = len(mock.requests("responses"))
    return f"{n} request(s), {wall:.1f}s"


TESTS = [
    ("claude_plain", test_claude_plain),
    ("claude_ask_sdk", test_claude_ask_sdk),
    ("claude_sigterm_midstream", test_claude_sigterm_midstream),
    ("claude_auth_fail_fast", test_claude_auth_fail_fast),
    ("opencode_plain", test_opencode_plain),
    ("opencode_readonly_bash", test_opencode_readonly_bash),
    ("opencode_subagent_readonly", test_opencode_subagent_readonly),
    ("codex_plain", test_codex_plain),
    ("codex_auth_401", test_codex_auth_401),
    ("codex_connrefused_fails_fast", test_codex_connrefused_fails_fast),
]


def load_bins():
    p = subprocess.run([os.path.join(HERE, "install.sh")], stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        print(f"install.sh exited {p.returncode}", file=sys.stderr)
        if p.returncode == 3:
            print("REAL-CLI TIER UNAVAILABLE (see install.sh output above)", file=sys.stderr)
            print("0 passed, 0 failed (real-CLI tier UNAVAILABLE: install.sh exit 3)")
        sys.exit(p.returncode)
    bins = {}
    for line in p.stdout.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            bins[k] = v
    return bins


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", action="store_true", help="keep every test's temp dir")
    ap.add_argument("-k", action="append", default=[], help="only tests whose name contains this")
    a = ap.parse_args()
    bins = load_bins()
    for k in ("CLAUDE_BIN", "OPENCODE_BIN", "CODEX_BIN"):
        print(f"{k}={bins.get(k)}")
    passed = failed = 0
    for name, fn in TESTS:
        if a.k and not any(s in name for s in a.k):
            continue
        tmp = tempfile.mkdtemp(prefix=f"planwire-realcli-{name}-")
        t0 = time.time()
        try:
            info = fn(tmp, bins)
            passed += 1
            print(f"PASS {name} ({info})", flush=True)
            if not a.keep:
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                print(f"     kept {tmp}")
        except Exception as e:  # Fail or anything unexpected
            failed += 1
            kind = "" if isinstance(e, Fail) else type(e).__name__ + ": "
            print(f"FAIL {name} after {time.time() - t0:.1f}s: {kind}{e}\n     artifacts: {tmp}", flush=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
