#!/usr/bin/env python3
"""Seeds the fuzz corpora (fuzz/corpus/<target>/) from the repository's own recordings:
tests/fixtures (real CLI streams), server/scripts (the script planner's streams) and the
JSON-RPC examples of protocol/README.md. Idempotent: a seed is named by its content's hash."""

import hashlib
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def frame(body):
    b = body.encode()
    return b"Content-Length: %d\r\n\r\n" % len(b) + b


def texts(line):
    """The text blocks of a Claude stream-json line (where plans are)."""
    try:
        v = json.loads(line)
    except ValueError:
        return []
    content = (v.get("message") or {}).get("content") or []
    out = [c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text"]
    if isinstance(v.get("result"), str):
        out.append(v["result"])
    return [t for t in out if t]


# `session/update`s of an ACP agent, one of each kind planwire maps (the shapes of
# agent-client-protocol-schema; the seeds only need to start the fuzzer somewhere useful).
ACP_UPDATES = [
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Reading the code. "}},
    {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "Where is main?"}},
    {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "Read src/main.rs", "kind": "read",
     "status": "pending", "rawInput": {"path": "src/main.rs"}},
    {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
     "content": [{"type": "content", "content": {"type": "text", "text": "fn main() {}"}}]},
    {"sessionUpdate": "plan", "entries": [{"content": "Change main", "priority": "high", "status": "pending"}]},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text":
        '<planwire-plan>{"title": "Greet", "description": "d", "acceptanceCriteria": [], '
        '"openQuestions": [], "dependencies": []}</planwire-plan>'}},
    {"sessionUpdate": "usage_update", "used": 120, "size": 200000, "cost": {"amount": 0.01, "currency": "USD"}},
]


def main():
    fixtures = ROOT / "tests" / "fixtures"
    for tool in ("claude", "codex"):
        for f in sorted((fixtures / tool).glob("*.jsonl")):
            put(tool, f.read_bytes())
    for f in sorted((fixtures / "opencode" / "serve").glob("*.sse.jsonl")):
        put("opencode", f.read_bytes())
    for update in ACP_UPDATES:
        put("acp", json.dumps({"jsonrpc": "2.0", "method": "session/update",
                               "params": {"sessionId": "s1", "update": update}}) + "\n")
    put("acp", "".join(json.dumps({"sessionId": "s1", "update": u}) + "\n" for u in ACP_UPDATES))
    plans = []
    for f in sorted((ROOT / "server" / "scripts").glob("*.jsonl")):
        stream = []
        for line in f.read_text().splitlines():
            out = json.loads(line).get("out") if line.strip() else None
            if isinstance(out, str):
                stream.append(out)
                plans.extend(texts(out))
        put("claude", "\n".join(stream) + "\n")
    for f in sorted((fixtures / "claude").glob("*.jsonl")):
        for line in f.read_text().splitlines():
            plans.extend(texts(line))
    for t in plans:
        put("plan", t)
    messages = [
        line.strip()
        for line in (ROOT / "protocol" / "README.md").read_text().splitlines()
        if line.startswith('{"jsonrpc"') and line.rstrip().endswith("}")
    ]
    messages = [m for m in messages if _is_json(m)]
    for m in messages:
        put("jsonrpc", m)
        put("frames", frame(m))
        put("ndjson", m + "\n")
    put("frames", b"".join(frame(m) for m in messages[:20]))
    put("ndjson", "\n".join(messages[:20]) + "\n")
    for f in sorted((fixtures / "codex").glob("*.jsonl")):
        lines = [json.loads(l) for l in f.read_text().splitlines() if l.strip()]
        put("ndjson", "".join(json.dumps(l["msg"]) + "\n" for l in lines if "msg" in l))
    counts = {d.name: len(list(d.iterdir())) for d in sorted(CORPUS.iterdir())}
    print("seeds:", ", ".join(f"{k} {v}" for k, v in counts.items()))


def _is_json(s):
    try:
        json.loads(s)
        return True
    except ValueError:
        return False


if __name__ == "__main__":
    sys.exit(main())
