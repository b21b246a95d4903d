#!/usr/bin/env python3
"""planwire's scripted mock model server for the real-CLI test tier (Python 3 stdlib only).

    mock_model.py --script SCRIPT.json --log REQUESTS.jsonl [--port 0] [--host 127.0.0.1]

Binds 127.0.0.1 (threaded). The first stdout line is `PORT <n>` (the real port, also when
--port 0 picks a free one); stdout is flushed right after it. Diagnostics go to stderr.

Endpoints
  any method on `/`                  200, empty body (Claude Code sends `HEAD /` at startup)
  POST /v1/messages[?beta=true]      Anthropic Messages, SSE (or JSON when "stream" is false)
  POST /v1/chat/completions          OpenAI Chat Completions, SSE (or JSON when "stream" is false)
  POST /v1/responses, /responses     OpenAI Responses, SSE
  GET  /v1/models, /models           a one-model list
  GET  /__mock/state                 {"consumed": {...}, "requests": n}
  POST /__mock/script                replace the script (body = a script) and reset the cursors

Script
  Either a JSON list of turns, or {"turns": [...]}. Each format has its own cursor: a request in
  format F only sees turns whose "format" is F or absent ("anthropic" | "chat" | "responses").
  Picking a turn for a request: the first unused turn with a "match" found in the raw request
  body wins; otherwise the first unused turn without "match". A picked turn is used up unless
  "repeat" says otherwise. When nothing is left the mock answers the text
  "(mock: script exhausted)" and says so on stderr.

  Turn keys (all optional):
    "format":  restrict the turn to one wire format
    "match":   substring that must occur in the raw request body (e.g. "You are a title generator"
               for OpenCode's title request, or a subagent's prompt)
    "repeat":  how many requests this turn serves (default 1; -1 = for ever)
    "text":    a string, or a list of strings = one text block each
    "thinking": a string: a thinking block (Anthropic), reasoning_content (Chat), a reasoning
               summary (Responses); it comes first
    "tool_calls": [{"name": N, "input": {...}, "id": optional call id}]; they come last
    "blocks":  instead of text/thinking/tool_calls, an ordered list of
               {"text": S} | {"thinking": S} | {"tool": N, "input": {...}, "id": optional}
    "error":   {"status": 401, "body": JSON or string (optional: a format-typed error body is
               generated), "message": S, "type": S, "headers": {...}}: answer that HTTP error
    "chunk_size": characters per text/argument delta (default 24)
    "chunk_delay_ms": sleep between SSE events carrying deltas (stop / kill tests)
    "initial_delay_ms": sleep before the response headers
    "hold_until": {"match": S, "timeout_ms": n (default 60000)}: hold the answer until a request
               whose raw body contains S has been logged (this one included), then log
               {"seq", "ts", "event": "released" | "hold timed out", "turn"} and answer. Two
               turns that hold for each other prove two requests were in flight at once.
    "drop_after_chunks": close the connection after this many delta events (no clean end)
    "gate_file", "gate_after_chunks": after that many delta events, hold the rest of the answer
               until the file exists (a test opens the gate once it saw the first pieces)
    "usage": {"input_tokens": n, "output_tokens": n, "cached_tokens": n, "reasoning_tokens": n}
    "stop_reason": override (Anthropic stop_reason / Chat finish_reason)

Request log: one JSON object per line, written and flushed before the answer starts:
  {"seq", "ts", "method", "path", "format", "headers": {...}, "body": parsed JSON | raw string,
   "turn": index into the script or null}
"""

import argparse
import gzip
import json
import os
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FORMATS = ("anthropic", "chat", "responses")


def eprint(*a):
    print("[mock]", *a, file=sys.stderr, flush=True)


class Script:
    def __init__(self, data):
        self.lock = threading.Lock()
        self.load(data)

    def load(self, data):
        turns = data.get("turns", []) if isinstance(data, dict) else list(data)
        with self.lock:
            self.turns = turns
            self.used_by_format = {f: [0] * len(turns) for f in FORMATS}

    def pick(self, fmt, raw_body):
        with self.lock:
            uses = self.used_by_format[fmt]

            def available(i, t):
                if t.get("format") not in (None, fmt):
                    return False
                rep = t.get("repeat", 1)
                return rep < 0 or uses[i] < rep

            choice = None
            for i, t in enumerate(self.turns):
                m = t.get("match")
                if m is not None and available(i, t) and m in raw_body:
                    choice = i
                    break
            if choice is None:
                for i, t in enumerate(self.turns):
                    if t.get("match") is None and available(i, t):
                        choice = i
                        break
            if choice is None:
                return None, {"text": "(mock: script exhausted)"}
            uses[choice] += 1
            return choice, self.turns[choice]

    def state(self):
        with self.lock:
            return {"turns": len(self.turns), "consumed": {f: list(v) for f, v in self.used_by_format.items()}}


def blocks_of(turn):
    """Normalise a turn into an ordered list of ("text"|"thinking"|"tool", payload) blocks."""
    out = []
    if "blocks" in turn:
        for b in turn["blocks"]:
            if "text" in b:
                out.append(("text", b["text"]))
            elif "thinking" in b:
                out.append(("thinking", b["thinking"]))
            elif "tool" in b:
                out.append(("tool", {"name": b["tool"], "input": b.get("input", {}), "id": b.get("id")}))
        return out
    if turn.get("thinking"):
        out.append(("thinking", turn["thinking"]))
    text = turn.get("text")
    if isinstance(text, str):
        out.append(("text", text))
    elif isinstance(text, list):
        out.extend(("text", t) for t in text)
    for tc in turn.get("tool_calls", []):
        out.append(("tool", {"name": tc["name"], "input": tc.get("input", tc.get("arguments", {})), "id": tc.get("id")}))
    return out


def chunks(s, n):
    n = max(1, int(n))
    return [s[i:i + n] for i in range(0, len(s), n)] or [""]


class Dropped(Exception):
    pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "planwire-mock/1"

    # quiet default logging; we log to the JSONL file instead
    def log_message(self, fmt, *args):
        pass

    # ---- plumbing -------------------------------------------------------------------------
    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n > 0 else b""
        if not n and self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                line = self.rfile.readline().strip()
                size = int(line.split(b";")[0] or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            raw = b"".join(parts)
        enc = (self.headers.get("Content-Encoding") or "").lower()
        try:
            if enc == "gzip":
                raw = gzip.decompress(raw)
            elif enc == "deflate":
                raw = zlib.decompress(raw)
        except Exception as e:  # keep the raw bytes
            eprint("could not decode", enc, e)
        return raw.decode("utf-8", "replace")

    def _log(self, fmt, raw, turn_idx):
        srv = self.server
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        with srv.log_lock:
            srv.seq += 1
            rec = {"seq": srv.seq, "ts": time.time(), "method": self.command, "path": self.path,
                   "format": fmt, "headers": {k.lower(): v for k, v in self.headers.items()},
                   "body": body, "turn": turn_idx}
            srv.log_file.write(json.dumps(rec) + "\n")
            srv.log_file.flush()
        with srv.seen:
            srv.bodies.append(raw)
            srv.seen.notify_all()

    def _hold(self, turn_idx, hold):
        """Waits until a logged request body holds hold["match"]; logs how the hold ended."""
        srv = self.server
        want = hold["match"]
        deadline = time.time() + float(hold.get("timeout_ms", 60000)) / 1000.0
        with srv.seen:
            released = srv.seen.wait_for(lambda: any(want in b for b in srv.bodies),
                                         timeout=max(0.0, deadline - time.time()))
        if not released:
            eprint(f"hold of turn {turn_idx} for {want!r} timed out")
        with srv.log_lock:
            srv.seq += 1
            rec = {"seq": srv.seq, "ts": time.time(), "event": "released" if released else "hold timed out",
                   "turn": turn_idx}
            srv.log_file.write(json.dumps(rec) + "\n")
            srv.log_file.flush()

    def _send_json(self, status, obj, headers=None):
        data = (obj if isinstance(obj, str) else json.dumps(obj)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _start_sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._deltas = 0

    def _chunk(self, data: bytes):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, name, obj, delta=False):
        """Write one SSE event. name=None writes a bare `data:` line (Chat Completions style)."""
        t = self._turn
        if delta:
            if t.get("drop_after_chunks") is not None and self._deltas >= int(t["drop_after_chunks"]):
                raise Dropped()
            if t.get("chunk_delay_ms"):
                time.sleep(float(t["chunk_delay_ms"]) / 1000.0)
            if t.get("gate_file") and self._deltas == int(t.get("gate_after_chunks", 1)):
                deadline = time.time() + 300
                while not os.path.exists(t["gate_file"]) and time.time() < deadline:
                    time.sleep(0.02)
            self._deltas += 1
        payload = obj if isinstance(obj, str) else json.dumps(obj)
        msg = (f"event: {name}\n" if name else "") + f"data: {payload}\n\n"
        self._chunk(msg.encode())

    def _end_sse(self):
        self._chunk(b"")

    # ---- dispatch -------------------------------------------------------------------------
    def _dispatch(self):
        path = self.path.split("?", 1)[0]
        raw = self._read_body() if self.command in ("POST", "PUT", "PATCH") else ""
        fmt = None
        if self.command == "POST":
            if path == "/v1/messages":
                fmt = "anthropic"
            elif path in ("/v1/chat/completions", "/chat/completions"):
                fmt = "chat"
            elif path in ("/v1/responses", "/responses"):
                fmt = "responses"
        if path == "/__mock/state":
            self._log(None, raw, None)
            return self._send_json(200, dict(self.server.script.state(), requests=self.server.seq))
        if path == "/__mock/script" and self.command == "POST":
            self.server.script.load(json.loads(raw))
            self._log(None, raw, None)
            return self._send_json(200, {"ok": True})
        if fmt is None:
            self._log(None, raw, None)
            if path == "/":
                return self._send_json(200, "")
            if path in ("/v1/models", "/models") and self.command == "GET":
                return self._send_json(200, {"object": "list", "data": [
                    {"id": "mock-model", "object": "model", "created": 0, "owned_by": "mock"}]})
            return self._send_json(404, {"error": {"message": f"mock: no route {self.command} {path}",
                                                   "type": "not_found"}})
        idx, turn = self.server.script.pick(fmt, raw)
        self._log(fmt, raw, idx)
        if idx is None:
            eprint(f"script exhausted for {fmt} request #{self.server.seq}")
        self._turn = turn
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        if turn.get("hold_until"):
            self._hold(idx, turn["hold_until"])
        if turn.get("initial_delay_ms"):
            time.sleep(float(turn["initial_delay_ms"]) / 1000.0)
        if "error" in turn:
            return self._error(fmt, turn["error"])
        stream = body.get("stream", fmt == "responses") is not False
        try:
            getattr(self, "_" + fmt)(turn, body, stream)
        except Dropped:
            eprint(f"dropping connection mid-stream (request #{self.server.seq})")
            self.close_connection = True
            try:
                self.wfile.flush()
                self.connection.shutdown(2)
            except OSError:
                pass
        except (BrokenPipeError, ConnectionResetError):
            eprint(f"client went away mid-answer (request #{self.server.seq})")
            self.close_connection = True

    do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _dispatch

    # ---- errors ---------------------------------------------------------------------------
    def _error(self, fmt, err):
        status = int(err.get("status", 500))
        body = err.get("body")
        msg = err.get("message", f"mock error {status}")
        if body is None:
            if fmt == "anthropic":
                typ = err.get("type") or {400: "invalid_request_error", 401: "authentication_error",
                                          403: "permission_error", 404: "not_found_error",
                                          429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
                body = {"type": "error", "error": {"type": typ, "message": msg}}
            else:
                typ = err.get("type") or ("invalid_request_error" if status < 500 else "server_error")
                code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status)
                body = {"error": {"message": msg, "type": typ, "param": None, "code": code}}
        self.close_connection = True
        self._send_json(status, body, dict(err.get("headers") or {}, Connection="close"))

    # ---- Anthropic Messages ---------------------------------------------------------------
    def _anthropic(self, turn, body, stream):
        usage = turn.get("usage", {})
        in_tok, out_tok = usage.get("input_tokens", 100), usage.get("output_tokens", 20)
        blocks = blocks_of(turn)
        has_tool = any(k == "tool" for k, _ in blocks)
        stop = turn.get("stop_reason") or ("tool_use" if has_tool else "end_turn")
        mid = "msg_mock_" + uuid.uuid4().hex[:20]
        model = body.get("model", "mock-model")
        csize = turn.get("chunk_size", 24)
        content = []
        for kind, p in blocks:
            if kind == "text":
                content.append({"type": "text", "text": p})
            elif kind == "thinking":
                content.append({"type": "thinking", "thinking": p, "signature": "mock-sig-" + uuid.uuid4().hex[:16]})
            else:
                content.append({"type": "tool_use", "id": p["id"] or "toolu_mock_" + uuid.uuid4().hex[:16],
                                "name": p["name"], "input": p["input"]})
        u = {"input_tokens": in_tok, "output_tokens": out_tok,
             "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
             "cache_read_input_tokens": usage.get("cached_tokens", 0)}
        if not stream:
            return self._send_json(200, {"id": mid, "type": "message", "role": "assistant", "model": model,
                                         "content": content, "stop_reason": stop, "stop_sequence": None,
                                         "usage": u})
        self._start_sse()
        self._event("message_start", {"type": "message_start", "message": {
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": dict(u, output_tokens=1)}})
        self._event("ping", {"type": "ping"})
        for i, c in enumerate(content):
            if c["type"] == "text":
                start = {"type": "text", "text": ""}
            elif c["type"] == "thinking":
                start = {"type": "thinking", "thinking": "", "signature": ""}
            else:
                start = {"type": "tool_use", "id": c["id"], "name": c["name"], "input": {}}
            self._event("content_block_start", {"type": "content_block_start", "index": i, "content_block": start})
            if c["type"] == "text":
                for piece in chunks(c["text"], csize):
                    self._event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                        "delta": {"type": "text_delta", "text": piece}}, delta=True)
            elif c["type"] == "thinking":
                for piece in chunks(c["thinking"], csize):
                    self._event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                        "delta": {"type": "thinking_delta", "thinking": piece}}, delta=True)
                self._event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                    "delta": {"type": "signature_delta", "signature": c["signature"]}})
            else:
                for piece in chunks(json.dumps(c["input"]), csize):
                    self._event("content_block_delta", {"type": "content_block_delta", "index": i,
                                                        "delta": {"type": "input_json_delta", "partial_json": piece}}, delta=True)
            self._event("content_block_stop", {"type": "content_block_stop", "index": i})
        self._event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": out_tok}})
        self._event("message_stop", {"type": "message_stop"})
        self._end_sse()

    # ---- OpenAI Chat Completions ----------------------------------------------------------
    def _chat(self, turn, body, stream):
        usage = turn.get("usage", {})
        in_tok, out_tok = usage.get("input_tokens", 100), usage.get("output_tokens", 20)
        u = {"prompt_tokens": in_tok, "completion_tokens": out_tok, "total_tokens": in_tok + out_tok,
             "prompt_tokens_details": {"cached_tokens": usage.get("cached_tokens", 0)},
             "completion_tokens_details": {"reasoning_tokens": usage.get("reasoning_tokens", 0)}}
        blocks = blocks_of(turn)
        tools = [p for k, p in blocks if k == "tool"]
        finish = turn.get("stop_reason") or ("tool_calls" if tools else "stop")
        cid = "chatcmpl-mock-" + uuid.uuid4().hex[:16]
        model = body.get("model", "mock-model")
        created = int(time.time())
        csize = turn.get("chunk_size", 24)
        call_ids = [t["id"] or f"call_mock_{uuid.uuid4().hex[:12]}" for t in tools]
        if not stream:
            text = "".join(p for k, p in blocks if k == "text")
            msg = {"role": "assistant", "content": text or None}
            th = "".join(p for k, p in blocks if k == "thinking")
            if th:
                msg["reasoning_content"] = th
            if tools:
                msg["tool_calls"] = [{"id": call_ids[i], "type": "function",
                                      "function": {"name": t["name"], "arguments": json.dumps(t["input"])}}
                                     for i, t in enumerate(tools)]
            return self._send_json(200, {"id": cid, "object": "chat.completion", "created": created, "model": model,
                                         "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                                         "usage": u})

        def chunk(delta, finish_reason=None):
            return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

        self._start_sse()
        self._event(None, chunk({"role": "assistant", "content": ""}))
        ti = 0
        for kind, p in blocks:
            if kind == "text":
                for piece in chunks(p, csize):
                    self._event(None, chunk({"content": piece}), delta=True)
            elif kind == "thinking":
                for piece in chunks(p, csize):
                    self._event(None, chunk({"reasoning_content": piece}), delta=True)
            else:
                self._event(None, chunk({"tool_calls": [{"index": ti, "id": call_ids[ti], "type": "function",
                                                         "function": {"name": p["name"], "arguments": ""}}]}))
                for piece in chunks(json.dumps(p["input"]), csize):
                    self._event(None, chunk({"tool_calls": [{"index": ti, "function": {"arguments": piece}}]}), delta=True)
                ti += 1
        self._event(None, chunk({}, finish))
        self._event(None, {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": [], "usage": u})
        self._event(None, "[DONE]")
        self._end_sse()

    # ---- OpenAI Responses -----------------------------------------------------------------
    def _responses(self, turn, body, stream):
        usage = turn.get("usage", {})
        in_tok, out_tok = usage.get("input_tokens", 100), usage.get("output_tokens", 20)
        rid = "resp_mock_" + uuid.uuid4().hex[:16]
        model = body.get("model", "mock-model")
        csize = turn.get("chunk_size", 24)
        created = int(time.time())
        seq = [0]

        def ev(name, obj, delta=False):
            obj = dict({"type": name, "sequence_number": seq[0]}, **obj)
            seq[0] += 1
            self._event(name, obj, delta)

        base = {"id": rid, "object": "response", "created_at": created, "model": model, "output": []}
        self._start_sse()
        ev("response.created", {"response": dict(base, status="in_progress")})
        ev("response.in_progress", {"response": dict(base, status="in_progress")})
        output = []
        for oi, (kind, p) in enumerate(blocks_of(turn)):
            prefix = {"text": "msg", "thinking": "rs", "tool": "fc"}[kind]
            iid = f"{prefix}_mock_{uuid.uuid4().hex[:12]}"
            if kind == "thinking":
                ev("response.output_item.added", {"output_index": oi, "item": {"id": iid, "type": "reasoning", "summary": []}})
                ev("response.reasoning_summary_part.added", {"item_id": iid, "output_index": oi, "summary_index": 0,
                                                             "part": {"type": "summary_text", "text": ""}})
                for piece in chunks(p, csize):
                    ev("response.reasoning_summary_text.delta", {"item_id": iid, "output_index": oi,
                                                                 "summary_index": 0, "delta": piece}, True)
                ev("response.reasoning_summary_text.done", {"item_id": iid, "output_index": oi, "summary_index": 0, "text": p})
                ev("response.reasoning_summary_part.done", {"item_id": iid, "output_index": oi, "summary_index": 0,
                                                            "part": {"type": "summary_text", "text": p}})
                item = {"id": iid, "type": "reasoning", "summary": [{"type": "summary_text", "text": p}]}
            elif kind == "text":
                ev("response.output_item.added", {"output_index": oi, "item": {
                    "id": iid, "type": "message", "role": "assistant", "status": "in_progress", "content": []}})
                ev("response.content_part.added", {"item_id": iid, "output_index": oi, "content_index": 0,
                                                   "part": {"type": "output_text", "text": "", "annotations": []}})
                for piece in chunks(p, csize):
                    ev("response.output_text.delta", {"item_id": iid, "output_index": oi, "content_index": 0,
                                                      "delta": piece}, True)
                ev("response.output_text.done", {"item_id": iid, "output_index": oi, "content_index": 0, "text": p})
                part = {"type": "output_text", "text": p, "annotations": []}
                ev("response.content_part.done", {"item_id": iid, "output_index": oi, "content_index": 0, "part": part})
                item = {"id": iid, "type": "message", "role": "assistant", "status": "completed", "content": [part]}
            else:
                call_id = p["id"] or "call_mock_" + uuid.uuid4().hex[:12]
                args = p["input"] if isinstance(p["input"], str) else json.dumps(p["input"])
                ev("response.output_item.added", {"output_index": oi, "item": {
                    "id": iid, "type": "function_call", "status": "in_progress", "call_id": call_id,
                    "name": p["name"], "arguments": ""}})
                for piece in chunks(args, csize):
                    ev("response.function_call_arguments.delta", {"item_id": iid, "output_index": oi, "delta": piece}, True)
                ev("response.function_call_arguments.done", {"item_id": iid, "output_index": oi, "arguments": args})
                item = {"id": iid, "type": "function_call", "status": "completed", "call_id": call_id,
                        "name": p["name"], "arguments": args}
            ev("response.output_item.done", {"output_index": oi, "item": item})
            output.append(item)
        ev("response.completed", {"response": dict(base, status="completed", output=output, usage={
            "input_tokens": in_tok, "input_tokens_details": {"cached_tokens": usage.get("cached_tokens", 0)},
            "output_tokens": out_tok, "output_tokens_details": {"reasoning_tokens": usage.get("reasoning_tokens", 0)},
            "total_tokens": in_tok + out_tok})})
        self._end_sse()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--script", required=True, help="JSON script file")
    ap.add_argument("--log", required=True, help="JSONL request log (appended)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    a = ap.parse_args()
    with open(a.script) as f:
        script = Script(json.load(f))
    srv = ThreadingHTTPServer((a.host, a.port), Handler)
    srv.daemon_threads = True
    srv.script = script
    srv.log_file = open(a.log, "a", buffering=1)
    srv.log_lock = threading.Lock()
    srv.seq = 0
    srv.seen = threading.Condition()
    srv.bodies = []
    print(f"PORT {srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()


if __name__ == "__main__":
    main()
