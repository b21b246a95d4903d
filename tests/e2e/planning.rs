use serde_json::{json, Value};

use crate::harness::*;

fn started(w: &World) -> Server {
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    s
}

fn create(s: &mut Server, w: &World, model: &str) -> i64 {
    let t = s.ok(
        "planwire/createTicket",
        json!({ "root": w.root(), "title": "Change the greeting", "description": "Say hi instead.", "tool": "script", "model": model }),
    );
    assert_eq!(t["status"], "draft");
    t["id"].as_i64().unwrap()
}

fn seqs(events: &[Value]) -> Vec<u64> {
    events.iter().map(|e| e["seq"].as_u64().unwrap()).collect()
}

#[test]
fn create_plan_stream_and_planned() {
    let w = World::new();
    let mut s = started(&w);
    let ticket = create(&mut s, &w, "demo");
    let r = s.ok("planwire/plan", json!({ "ticketId": ticket }));
    let run = r["runId"].as_i64().unwrap();
    assert_eq!(r["ticketId"], ticket);
    let t = s.wait_planned(ticket);
    assert_eq!(t["plan"]["title"], "Change the greeting printed by main");
    assert!(t["plan"]["description"].as_str().unwrap().contains("## Steps"));
    assert_eq!(t["plan"]["acceptanceCriteria"].as_array().unwrap().len(), 2);

    // Numbered from 1 with no gaps, and exactly what getTranscript returns.
    let notified = s.notified_events(run);
    assert_eq!(seqs(&notified), (1..=notified.len() as u64).collect::<Vec<_>>());
    let page = s.ok("planwire/getTranscript", json!({ "runId": run }));
    assert_eq!(page["events"].as_array().unwrap(), &notified);
    assert_eq!(page["lastSeq"], notified.len());
    assert_eq!(page["done"], true);
    let kinds: Vec<&str> = notified.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    for k in ["session", "reasoning", "text", "toolCall", "toolResult", "usage"] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    let finals: Vec<&Value> = notified
        .iter()
        .filter(|e| e["kind"] == "text" && e["final"] == true)
        .collect();
    assert_eq!(finals.len(), 1);
    assert!(finals[0]["text"].as_str().unwrap().contains("<planwire-plan>"));

    // Work-done progress: created, begun and ended for this run.
    let token = format!("planwire/run/{run}");
    let progress: Vec<&Value> = s
        .seen
        .iter()
        .filter(|m| m["method"] == "$/progress" && m["params"]["token"] == token)
        .collect();
    assert_eq!(progress.first().unwrap()["params"]["value"]["kind"], "begin");
    s.wait_for("progress end", |m| {
        m["method"] == "$/progress" && m["params"]["value"]["kind"] == "end"
    });

    // The run, the conversation and the plan are stored and survive a restart.
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    let runs = got["runs"].as_array().unwrap();
    assert_eq!(runs[0]["status"], "completed");
    assert_eq!(runs[0]["exitCode"], 0);
    let kinds: Vec<&str> = got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["description", "response", "plan"]);
    assert_eq!(s.shutdown_and_exit(), 0);

    let mut again = started(&w);
    let after = again.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(after["ticket"]["status"], "planned");
    assert_eq!(after["ticket"]["plan"], got["ticket"]["plan"]);
    let page2 = again.ok("planwire/getTranscript", json!({ "runId": run }));
    assert_eq!(page2["events"], page["events"]);
}

#[test]
fn plan_can_create_the_ticket() {
    let w = World::new();
    let mut s = started(&w);
    let r = s.ok(
        "planwire/plan",
        json!({ "root": w.root(), "title": "T", "description": "", "tool": "script", "model": "demo" }),
    );
    let ticket = r["ticketId"].as_i64().unwrap();
    s.wait_planned(ticket);
    let list = s.ok("planwire/listTickets", json!({ "root": w.root() }));
    assert_eq!(list["tickets"].as_array().unwrap().len(), 1);
}

#[test]
fn get_transcript_pages_after_a_seq() {
    let w = World::new();
    let mut s = started(&w);
    let ticket = create(&mut s, &w, "demo");
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    s.wait_ticket(ticket, &["planned"]);
    let all = s.notified_events(run);
    let last = all.len() as u64;
    let mut collected = Vec::new();
    let mut after = 0;
    loop {
        let page = s.ok(
            "planwire/getTranscript",
            json!({ "runId": run, "afterSeq": after, "limit": 2 }),
        );
        let events = page["events"].as_array().unwrap().clone();
        assert_eq!(page["lastSeq"], last, "lastSeq is the run's, not the page's");
        assert!(events.len() <= 2);
        collected.extend(events.clone());
        after = events.last().map_or(after, |e| e["seq"].as_u64().unwrap());
        if page["done"] == true {
            break;
        }
        assert!(!events.is_empty());
    }
    assert_eq!(collected, all);
    let tail = s.ok("planwire/getTranscript", json!({ "runId": run, "afterSeq": 3 }));
    assert_eq!(tail["events"].as_array().unwrap().as_slice(), &all[3..]);
    assert_eq!(s.err("planwire/getTranscript", json!({ "runId": 999 }))["code"], -32011);
}

#[test]
fn open_questions_leave_the_ticket_needing_input() {
    let w = World::new();
    let mut s = started(&w);
    let ticket = create(&mut s, &w, "questions");
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    let t = s.wait_ticket(ticket, &["needs_input", "planned", "failed"]);
    assert_eq!(t["status"], "needs_input");
    let q = s.wait_for("question", |m| m["method"] == "planwire/question");
    assert_eq!(q["params"]["runId"], run);
    let question = &q["params"]["question"];
    assert_eq!(
        (question["source"].clone(), question["status"].clone()),
        (json!("plan"), json!("open"))
    );
    let items = question["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["allowOther"], true);
    assert_eq!(t["openQuestions"][0]["id"], question["id"]);
    // The question is an event of the transcript too.
    let events = s.ok("planwire/getTranscript", json!({ "runId": run }))["events"].clone();
    assert_eq!(events.as_array().unwrap().last().unwrap()["questionId"], question["id"]);
    // A later client sees it through listTickets.
    let list = s.ok("planwire/listTickets", json!({}));
    assert_eq!(list["tickets"][0]["openQuestions"][0]["id"], question["id"]);
}

#[test]
fn planner_error_fails_the_run_with_the_clis_own_message() {
    let w = World::new();
    let mut s = started(&w);
    let ticket = create(&mut s, &w, "fail");
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    assert_eq!(s.wait_ticket(ticket, &["failed", "planned"])["status"], "failed");
    let got = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    let r = &got["runs"][0];
    assert_eq!(
        (r["status"].clone(), r["exitCode"].clone()),
        (json!("failed"), json!(1))
    );
    assert_eq!(r["failure"]["code"], "planner_error");
    assert!(
        r["failure"]["message"].as_str().unwrap().contains("Invalid API key"),
        "{r}"
    );
    let errors: Vec<Value> = s
        .notified_events(run)
        .into_iter()
        .filter(|e| e["kind"] == "error")
        .collect();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["errorKind"], "auth");
    let last = got["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["kind"], "error");
}

#[test]
fn garbage_output_and_a_crash_keep_every_line_and_report_stderr() {
    let w = World::new();
    let script = w.script(
        "crash.jsonl",
        &[
            json!({ "out": "this is not json" }),
            json!({ "out": "{\"type\":\"mystery\",\"x\":1}" }),
            json!({ "out": "{\"type\":\"assistant\",\"message\":{\"id\":\"m1\",\"content\":[{\"type\":\"text\",\"text\":\"Half a pla" }),
            json!({ "err": "panic: the planner fell over" }),
            json!({ "exit": 3 }),
        ],
    );
    let mut s = started(&w);
    let ticket = create(&mut s, &w, &script);
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    assert_eq!(s.wait_ticket(ticket, &["failed", "planned"])["status"], "failed");
    let events = s.ok("planwire/getTranscript", json!({ "runId": run }))["events"].clone();
    let raws: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "raw")
        .map(|e| e["line"].as_str().unwrap())
        .collect();
    assert_eq!(raws.len(), 3, "{events}");
    assert_eq!(raws[0], "this is not json");
    let r = &s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["runs"][0];
    assert_eq!(r["exitCode"], 3);
    assert_eq!(r["failure"]["code"], "exit_code");
    assert_eq!(r["failure"]["message"], "panic: the planner fell over");
    // The server is still serving.
    s.ok("planwire/status", json!({}));
}

#[test]
fn exit_zero_without_a_plan_is_no_plan() {
    let w = World::new();
    let line = json!({"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"I have no plan."}]},"parent_tool_use_id":null,"session_id":"s1"});
    let result = json!({"type":"result","subtype":"success","is_error":false,"result":"I have no plan.","session_id":"s1","usage":{"input_tokens":1,"output_tokens":1},"total_cost_usd":0.0});
    let script = w.script(
        "noplan.jsonl",
        &[json!({ "out": line.to_string() }), json!({ "out": result.to_string() })],
    );
    let mut s = started(&w);
    let ticket = create(&mut s, &w, &script);
    s.ok("planwire/plan", json!({ "ticketId": ticket }));
    assert_eq!(s.wait_ticket(ticket, &["failed", "planned"])["status"], "failed");
    let r = &s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["runs"][0];
    assert_eq!(
        (r["exitCode"].clone(), r["failure"]["code"].clone()),
        (json!(0), json!("no_plan"))
    );
}

#[test]
fn idle_and_hard_timeouts_fail_the_run_with_their_codes() {
    for (opts, code) in [
        (json!({ "idleTimeoutMs": 300 }), "idle_timeout"),
        (json!({ "hardTimeoutMs": 1500, "idleTimeoutMs": 60000 }), "hard_timeout"),
    ] {
        let w = World::new();
        let mut s = w.start();
        let mut opts = opts.clone();
        opts["dbPath"] = json!(w.db());
        opts["stopGraceMs"] = json!(500);
        s.initialize(opts);
        let ticket = create(&mut s, &w, "slow");
        let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
            .as_i64()
            .unwrap();
        assert_eq!(
            s.wait_ticket(ticket, &["failed", "planned", "stopped"])["status"],
            "failed"
        );
        let r = &s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["runs"][0];
        assert_eq!(r["failure"]["code"], code, "{r}");
        let (pgid, start) = run_group(&w, run);
        assert!(!group_alive(pgid, start));
    }
}

#[test]
fn retry_of_reuses_that_runs_tool_and_model() {
    let w = World::new();
    let mut s = started(&w);
    let ticket = create(&mut s, &w, "fail");
    let first = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    s.wait_ticket(ticket, &["failed"]);
    let second = s.ok("planwire/plan", json!({ "ticketId": ticket, "retryOf": first }))["runId"]
        .as_i64()
        .unwrap();
    assert_ne!(first, second);
    s.wait_for("second run ends", |m| {
        m["method"] == "planwire/runChanged"
            && m["params"]["run"]["id"] == second
            && m["params"]["run"]["status"] == "failed"
    });
    let runs = s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["runs"].clone();
    assert_eq!(runs[0]["model"], "fail");
    assert_eq!(runs[0]["tool"], "script");
    assert_eq!(
        s.err("planwire/plan", json!({ "ticketId": ticket, "retryOf": 999 }))["code"],
        -32011
    );
}

#[test]
fn list_tickets_pages_with_limit_and_after_id() {
    let w = World::new();
    let mut s = started(&w);
    for i in 0..5 {
        s.ok(
            "planwire/createTicket",
            json!({ "root": w.root(), "title": format!("T{i}"), "description": "" }),
        );
    }
    let mut titles = Vec::new();
    let mut after = Value::Null;
    loop {
        let page = s.ok(
            "planwire/listTickets",
            json!({ "root": w.root(), "limit": 2, "afterId": after }),
        );
        titles.extend(
            page["tickets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["title"].as_str().unwrap().to_owned()),
        );
        match page.get("nextAfterId") {
            Some(next) => after = next.clone(),
            None => break,
        }
    }
    assert_eq!(titles, ["T0", "T1", "T2", "T3", "T4"]);
    let all = s.ok("planwire/listTickets", json!({}));
    assert!(all.get("nextAfterId").is_none());
}

#[test]
fn a_plan_early_in_a_long_stream_is_read_back_from_the_store() {
    // The parser keeps a bounded tail of the text: a plan given early, then megabytes of
    // more text, is found in the stored transcript.
    let w = World::new();
    let mut s = started(&w);
    let text = |id: &str, t: &str| {
        json!({"type": "assistant", "message": {"id": id, "type": "message", "role": "assistant",
               "content": [{"type": "text", "text": t}]}, "parent_tool_use_id": null, "session_id": "s"})
        .to_string()
    };
    let plan = r#"Early. <planwire-plan>{"title": "Early plan", "description": "Found in the store.", "acceptanceCriteria": [], "openQuestions": [], "dependencies": []}</planwire-plan>"#;
    let filler = format!("more notes @@N@@ {}", "n".repeat(2000));
    let result = json!({"type": "result", "subtype": "success", "is_error": false, "result": "All done.",
                        "session_id": "s", "usage": {"input_tokens": 1, "output_tokens": 1}});
    let script = w.script(
        "early.jsonl",
        &[
            json!({"format": "claude"}),
            json!({"out": json!({"type": "system", "subtype": "init", "session_id": "s"}).to_string()}),
            json!({"out": text("msg_plan", plan)}),
            json!({"out": text("msg_more_@@N@@", &filler), "repeat": 1500}),
            json!({"out": result.to_string()}),
            json!({"exit": 0}),
        ],
    );
    let r = s.ok(
        "planwire/plan",
        json!({ "root": w.root(), "title": "Long", "description": "", "tool": "script", "model": script }),
    );
    let ticket = s.wait_planned(r["ticketId"].as_i64().unwrap());
    assert_eq!(ticket["plan"]["title"], "Early plan");
}

#[test]
fn several_json_objects_on_one_stdout_line_are_all_parsed() {
    let w = World::new();
    let plan = r#"Here it is. <planwire-plan>{"title": "Greet", "description": "Change it.", "acceptanceCriteria": ["it greets"], "openQuestions": [], "dependencies": []}</planwire-plan>"#;
    let init =
        json!({"type": "system", "subtype": "init", "session_id": "s-joined", "tools": [], "permissionMode": "plan"});
    let text = json!({"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": plan}]}, "parent_tool_use_id": null});
    let result = json!({"type": "result", "subtype": "success", "is_error": false, "result": plan, "total_cost_usd": 0.0, "usage": {}});
    // Three objects on one line, then junk after them.
    let joined = format!("{init}{text} {result} <eof junk>");
    let script = w.script("joined.jsonl", &[json!({ "out": joined }), json!({ "exit": 0 })]);
    let mut s = started(&w);
    let ticket = create(&mut s, &w, &script);
    let run = s.ok("planwire/plan", json!({ "ticketId": ticket }))["runId"]
        .as_i64()
        .unwrap();
    let t = s.wait_planned(ticket);
    assert_eq!(t["plan"]["title"], "Greet");
    let kinds: Vec<String> = s
        .notified_events(run)
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["session", "text", "usage", "raw"]);
    let raw = s.notified_events(run).into_iter().find(|e| e["kind"] == "raw").unwrap();
    assert_eq!(raw["line"], "<eof junk>", "only what is left over is raw");
}
