//! Claude Code stream-json streams of any size, built from the recorded shapes in
//! `tests/fixtures/claude` (assistant text and tool_use lines, user tool_result lines) and
//! `server/scripts/demo.jsonl` (the init line, the final plan and the result), and the
//! `script` planner files that replay them.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::client::STAMP_MARK;

/// The token the script planner replaces with CLOCK_MONOTONIC ns as it writes a line.
pub const STAMP_TOKEN: &str = "@@PWNS@@";

pub struct Shapes {
    init: String,
    texts: Vec<Value>,
    tool_uses: Vec<Value>,
    results: Vec<Value>,
    final_text: String,
    result: String,
}

/// The repository root: the nearest ancestor of the working directory with the fixtures,
/// else the one this crate was built from.
pub fn repo_root() -> PathBuf {
    let has = |p: &Path| p.join("tests/fixtures/claude").is_dir();
    if let Ok(cwd) = std::env::current_dir() {
        if let Some(p) = cwd.ancestors().find(|p| has(p)) {
            return p.to_owned();
        }
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_owned()
}

fn is_main(v: &Value) -> bool {
    v.get("parent_tool_use_id").is_none_or(Value::is_null) && v.get("error").is_none()
}

fn one_block<'a>(v: &'a Value, kind: &str) -> Option<&'a Value> {
    let content = v.pointer("/message/content")?.as_array()?;
    (content.len() == 1 && content[0]["type"] == kind).then(|| &content[0])
}

impl Shapes {
    pub fn load(root: &Path) -> Shapes {
        let dir = root.join("tests/fixtures/claude");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().ends_with(".stdout.jsonl"))
            .collect();
        files.sort();
        let (mut texts, mut tool_uses, mut results) = (Vec::new(), Vec::new(), Vec::new());
        for f in files {
            for line in BufReader::new(std::fs::File::open(&f).expect("fixture")).lines() {
                let Ok(v) = serde_json::from_str::<Value>(&line.expect("fixture line")) else {
                    continue;
                };
                if !is_main(&v) {
                    continue;
                }
                match v["type"].as_str() {
                    Some("assistant") => {
                        if one_block(&v, "text").is_some() {
                            texts.push(v);
                        } else if let Some(b) = one_block(&v, "tool_use") {
                            if b["name"] != "Task" && b["name"] != "Agent" {
                                tool_uses.push(v);
                            }
                        }
                    }
                    Some("user") if one_block(&v, "tool_result").is_some() => results.push(v),
                    _ => {}
                }
            }
        }
        assert!(
            !texts.is_empty() && !tool_uses.is_empty() && !results.is_empty(),
            "no usable shapes in {}",
            dir.display()
        );
        let demo = std::fs::read_to_string(root.join("server/scripts/demo.jsonl")).expect("server/scripts/demo.jsonl");
        let outs: Vec<String> = demo
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|d| d["out"].as_str().map(str::to_owned))
            .collect();
        let find = |pred: &dyn Fn(&Value) -> bool| {
            outs.iter()
                .find(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| pred(&v)))
                .cloned()
                .expect("a line of demo.jsonl")
        };
        Shapes {
            init: find(&|v| v["subtype"] == "init"),
            final_text: find(&|v| v["type"] == "assistant" && v.to_string().contains("planwire-plan")),
            result: find(&|v| v["type"] == "result"),
            texts,
            tool_uses,
            results,
        }
    }

    /// One cycle of three lines (text, tool_use, tool_result) numbered `k`. With `stamp`,
    /// each line carries `pwts:@@PWNS@@` in the text the parser keeps.
    pub fn cycle(&self, k: usize, stamp: bool) -> [String; 3] {
        let msg_id = format!("msg_bench_{k:09}");
        let call_id = format!("toolu_bench_{k:09}");
        let mark = if stamp {
            format!(" {STAMP_MARK}{STAMP_TOKEN}")
        } else {
            String::new()
        };
        let mut text = self.texts[k % self.texts.len()].clone();
        text["message"]["id"] = json!(msg_id);
        text["uuid"] = json!(format!("bench-{k}-t"));
        let block = &mut text["message"]["content"][0];
        let original = block["text"].as_str().unwrap_or("").to_owned();
        block["text"] = json!(if stamp {
            format!("step {k}{mark}")
        } else {
            format!("{original} (step {k})")
        });

        let mut tool = self.tool_uses[k % self.tool_uses.len()].clone();
        tool["message"]["id"] = json!(msg_id);
        tool["uuid"] = json!(format!("bench-{k}-u"));
        let block = &mut tool["message"]["content"][0];
        block["id"] = json!(call_id);
        if stamp {
            block["name"] = json!("Bash");
            block["input"] = json!({ "command": format!("echo{mark}") });
        }

        let mut result = self.results[k % self.results.len()].clone();
        result["uuid"] = json!(format!("bench-{k}-r"));
        let block = &mut result["message"]["content"][0];
        block["tool_use_id"] = json!(call_id);
        if stamp {
            block["content"] = json!(format!("ok{mark}"));
            block["is_error"] = json!(false);
        }
        [text, tool, result].map(|v| v.to_string())
    }

    pub fn init(&self) -> &str {
        &self.init
    }

    /// The final text (with the plan) and the result line.
    pub fn ending(&self) -> [&str; 2] {
        [&self.final_text, &self.result]
    }
}

/// The lines of a stream of about `bytes` bytes (whole cycles), without their `\n`, one at a
/// time (a 400 MB stream is never held whole).
pub fn each_stream_line(shapes: &Shapes, bytes: u64, mut f: impl FnMut(&str)) {
    f(shapes.init());
    let mut total = shapes.init().len() as u64 + 1;
    let mut k = 0;
    while total < bytes {
        for l in shapes.cycle(k, false) {
            total += l.len() as u64 + 1;
            f(&l);
        }
        k += 1;
    }
    for l in shapes.ending() {
        f(l);
    }
}

/// Writes `lines` as a script file: one `{"out": …}` directive each, at full speed.
pub fn write_script(path: &Path, lines: &[String]) {
    let tmp = path.with_extension("tmp");
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp).expect("script"));
    writeln!(w, "{}", json!({"format": "claude"})).unwrap();
    for l in lines {
        writeln!(w, "{}", json!({ "out": l })).unwrap();
    }
    writeln!(w, "{}", json!({"exit": 0})).unwrap();
    w.flush().unwrap();
    drop(w);
    std::fs::rename(&tmp, path).expect("rename script");
}

/// The stream of `mb` MB and its script, generated once into `cache` and reused.
/// Returns (stream file, script file, stream bytes).
pub fn cached_stream(shapes: &Shapes, cache: &Path, bytes: u64) -> (PathBuf, PathBuf, u64) {
    let stream = cache.join(format!("claude-stream-{bytes}-v1.jsonl"));
    let script = cache.join(format!("claude-script-{bytes}-v1.jsonl"));
    if !(stream.is_file() && script.is_file()) {
        let (tmp, tmp_script) = (stream.with_extension("tmp"), script.with_extension("tmp"));
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp).unwrap());
        let mut s = BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp_script).unwrap());
        writeln!(s, "{}", json!({"format": "claude"})).unwrap();
        each_stream_line(shapes, bytes, |l| {
            writeln!(w, "{l}").unwrap();
            writeln!(s, "{}", json!({ "out": l })).unwrap();
        });
        writeln!(s, "{}", json!({"exit": 0})).unwrap();
        w.flush().unwrap();
        s.flush().unwrap();
        drop((w, s));
        std::fs::rename(&tmp, &stream).unwrap();
        std::fs::rename(&tmp_script, &script).unwrap();
    }
    let len = std::fs::metadata(&stream).unwrap().len();
    (stream, script, len)
}

/// A paced, stamped script: `lines` lines at `per_sec` lines per second (`atMs` from the
/// start of the replay, so pacing does not drift), each with the write-time stamp.
/// Returns the stream's size in bytes.
pub fn write_latency_script(shapes: &Shapes, path: &Path, lines: usize, per_sec: u64) -> u64 {
    let mut w = BufWriter::new(std::fs::File::create(path).expect("script"));
    writeln!(w, "{}", json!({"format": "claude"})).unwrap();
    writeln!(w, "{}", json!({ "out": shapes.init() })).unwrap();
    let mut bytes = shapes.init().len() as u64 + 1;
    let mut n = 0usize;
    let mut k = 0;
    while n < lines {
        for l in shapes.cycle(k, true) {
            // The stamp token becomes a number of about the same length.
            bytes += l.len() as u64 + 1;
            let at_ms = n as u64 * 1000 / per_sec;
            writeln!(w, "{}", json!({ "out": l, "atMs": at_ms, "stamp": STAMP_TOKEN })).unwrap();
            n += 1;
        }
        k += 1;
    }
    for l in shapes.ending() {
        bytes += l.len() as u64 + 1;
        writeln!(w, "{}", json!({ "out": l })).unwrap();
    }
    writeln!(w, "{}", json!({"exit": 0})).unwrap();
    w.flush().unwrap();
    bytes
}

/// `n` small tool_result lines (one event each) in a full-speed script, for a long transcript.
pub fn write_many_events_script(shapes: &Shapes, path: &Path, n: usize) {
    let mut lines = vec![shapes.init().to_owned()];
    for k in 0..n.saturating_sub(3) {
        lines.push(
            json!({"type": "user", "message": {"role": "user", "content": [
                {"tool_use_id": format!("toolu_q_{k}"), "type": "tool_result",
                 "content": format!("result {k}: a short tool output line")}]},
                "parent_tool_use_id": null, "session_id": "bench-session"})
            .to_string(),
        );
    }
    lines.extend(shapes.ending().map(str::to_owned));
    write_script(path, &lines);
}
