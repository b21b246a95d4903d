//! Project memory and prompt settings through the real binary: settings and memory requests,
//! and what reaches the planner's prompt (a fake `claude` records its stdin).

use serde_json::{json, Value};

use crate::claude_cli::{fake_claude_sequence, prompt_of};
use crate::harness::*;

fn started(w: &World) -> Server {
    let mut s = w.start();
    s.initialize(json!({ "dbPath": w.db() }));
    s
}

/// Creates a ticket planned by the fake `claude` and plans it until it is planned.
fn plan_new_ticket(s: &mut Server, w: &World, title: &str) -> (i64, i64) {
    let r = s.ok(
        "planwire/plan",
        json!({ "root": w.root(), "title": title, "description": "Say hi instead.", "tool": "claude" }),
    );
    let (ticket, run) = (r["ticketId"].as_i64().unwrap(), r["runId"].as_i64().unwrap());
    s.wait_planned(ticket);
    (ticket, run)
}

/// A Claude stream-json script whose plan carries `memorySuggestions`.
fn suggesting_script(w: &World, suggestions: &[&str]) -> String {
    let plan = json!({
        "title": "Change the greeting",
        "description": "## Context\nThe greeting is in src/main.rs.",
        "acceptanceCriteria": ["prints hi"],
        "openQuestions": [],
        "dependencies": [],
        "memorySuggestions": suggestions,
    });
    let text = format!("I read src/main.rs.\n\n<planwire-plan>{plan}</planwire-plan>");
    let session = "5a1d6c4e-0b7e-4f0e-9d7c-3f1b2a9e8d70";
    let assistant = json!({"type": "assistant", "message": {"id": "m1", "content": [{"type": "text", "text": text}]},
        "parent_tool_use_id": null, "session_id": session});
    let result = json!({"type": "result", "subtype": "success", "is_error": false, "result": text, "session_id": session,
        "usage": {"input_tokens": 1, "output_tokens": 1}, "total_cost_usd": 0.0});
    w.script(
        "suggesting.jsonl",
        &[
            // Replay only once planwire has sent the prompt, so the prompt is always recorded.
            json!({ "awaitStdin": "user" }),
            json!({ "out": assistant.to_string() }),
            json!({ "out": result.to_string() }),
            json!({ "exit": 0 }),
        ],
    )
}

#[test]
fn project_settings_round_trip() {
    let w = World::new();
    let mut s = started(&w);
    let root = w.root();
    let defaults = json!({ "root": root, "memoryEnabled": true, "outputLanguage": null, "skills": [],
        "extraInstructions": null });
    assert_eq!(s.ok("planwire/getProjectSettings", json!({ "root": root })), defaults);

    let skills = json!([{ "name": "migrations", "text": "Every schema change is a new migration." }]);
    let set = s.ok(
        "planwire/setProjectSettings",
        json!({ "root": root, "outputLanguage": " German ", "skills": skills }),
    );
    let want = json!({ "root": root, "memoryEnabled": true, "outputLanguage": "German", "skills": skills,
        "extraInstructions": null });
    assert_eq!(set, want);
    // Fields left out keep their value; the root is stored canonical.
    let alias = format!("{}/src/..", w.path("project").display());
    let set = s.ok(
        "planwire/setProjectSettings",
        json!({ "root": alias, "memoryEnabled": false, "extraInstructions": "Be brief." }),
    );
    assert_eq!(
        (&set["root"], &set["outputLanguage"], &set["skills"]),
        (&json!(root), &json!("German"), &skills)
    );
    assert_eq!(s.ok("planwire/getProjectSettings", json!({ "root": root })), set);
    // Empty strings and [] clear.
    let cleared = s.ok(
        "planwire/setProjectSettings",
        json!({ "root": root, "outputLanguage": "", "skills": [], "extraInstructions": "", "memoryEnabled": true }),
    );
    assert_eq!(cleared, defaults);

    // The settings survive a restart.
    s.ok(
        "planwire/setProjectSettings",
        json!({ "root": root, "outputLanguage": "fr" }),
    );
    assert_eq!(s.shutdown_and_exit(), 0);
    let mut s = started(&w);
    assert_eq!(
        s.ok("planwire/getProjectSettings", json!({ "root": root }))["outputLanguage"],
        "fr"
    );

    let bad_skill = json!({ "root": root, "skills": [{ "name": " ", "text": "x" }] });
    assert_eq!(s.err("planwire/setProjectSettings", bad_skill)["code"], -32602);
    let twice = json!({ "root": root, "skills": [{ "name": "a", "text": "x" }, { "name": "a", "text": "y" }] });
    assert_eq!(s.err("planwire/setProjectSettings", twice)["code"], -32602);
    assert_eq!(
        s.err("planwire/getProjectSettings", json!({ "root": "relative/dir" }))["code"],
        -32602
    );
    let missing = w.path("nope").display().to_string();
    assert_eq!(
        s.err("planwire/setProjectSettings", json!({ "root": missing }))["code"],
        -32013
    );
}

#[test]
fn memory_entries_are_added_listed_and_removed() {
    let w = World::new();
    let mut s = started(&w);
    let root = w.root();
    let empty = s.ok("planwire/memory/list", json!({ "root": root }));
    assert_eq!(empty, json!({ "entries": [], "suggestions": [] }));
    let a = s.ok(
        "planwire/memory/add",
        json!({ "root": root, "text": "  Tests wait on conditions.  " }),
    );
    assert_eq!(
        (&a["text"], &a["source"]),
        (&json!("Tests wait on conditions."), &json!("user"))
    );
    assert!(a["createdAt"].is_string());
    let b = s.ok(
        "planwire/memory/add",
        json!({ "root": root, "text": "SQLite is bundled." }),
    );
    let listed = s.ok("planwire/memory/list", json!({ "root": root }));
    assert_eq!(listed["entries"], json!([b, a]), "newest first");

    assert_eq!(
        s.ok("planwire/memory/remove", json!({ "entryId": a["id"] })),
        json!({ "removed": true })
    );
    assert_eq!(
        s.ok("planwire/memory/remove", json!({ "entryId": a["id"] })),
        json!({ "removed": false })
    );
    assert_eq!(
        s.ok("planwire/memory/list", json!({ "root": root }))["entries"],
        json!([b])
    );

    assert_eq!(
        s.err("planwire/memory/add", json!({ "root": root, "text": " " }))["code"],
        -32602
    );
    let long = "x".repeat(1001);
    assert_eq!(
        s.err("planwire/memory/add", json!({ "root": root, "text": long }))["code"],
        -32602
    );
    assert_eq!(
        s.err("planwire/memory/accept", json!({ "suggestionId": 999 }))["code"],
        -32011
    );
}

#[test]
fn an_output_language_reaches_the_prompt_only_when_set() {
    let w = World::new();
    fake_claude_sequence(&w, &["demo"]);
    let mut s = started(&w);
    plan_new_ticket(&mut s, &w, "No language");
    let plain = prompt_of(&w, 1);
    assert!(!plain.contains("<output-language>"), "{plain}");
    assert!(!plain.contains("English"));

    s.ok(
        "planwire/setProjectSettings",
        json!({ "root": w.root(), "outputLanguage": "German", "extraInstructions": "Mention the migration.",
                "skills": [{ "name": "house style", "text": "Name every file." }] }),
    );
    let (ticket, run) = plan_new_ticket(&mut s, &w, "With language");
    let german = prompt_of(&w, 2);
    assert!(german.contains("<output-language>German</output-language>"), "{german}");
    assert!(german.contains("<skill name=\"house style\">\nName every file.\n</skill>"));
    assert!(german.contains("<extra-instructions>\nMention the migration.\n</extra-instructions>"));

    // A retry uses the settings its run recorded, not the project's current ones.
    s.ok(
        "planwire/setProjectSettings",
        json!({ "root": w.root(), "outputLanguage": "French" }),
    );
    s.seen.clear();
    s.ok("planwire/plan", json!({ "ticketId": ticket, "retryOf": run }));
    s.wait_ticket(ticket, &["planned"]);
    let retried = prompt_of(&w, 3);
    assert!(
        retried.contains("<output-language>German</output-language>"),
        "{retried}"
    );
    assert!(!retried.contains("French"));
}

#[test]
fn the_clients_locale_is_the_language_when_none_is_set() {
    let w = World::new();
    fake_claude_sequence(&w, &["demo"]);
    let mut s = w.start();
    s.ok(
        "initialize",
        json!({ "processId": null, "locale": "pt-BR", "capabilities": {}, "initializationOptions": { "dbPath": w.db() } }),
    );
    plan_new_ticket(&mut s, &w, "Locale");
    assert!(prompt_of(&w, 1).contains("<output-language>pt-BR</output-language>"));
    // The user's default wins over the locale.
    drop(s);
    let mut s = w.start();
    s.ok(
        "initialize",
        json!({ "processId": null, "locale": "pt-BR", "capabilities": {},
                "initializationOptions": { "dbPath": w.db(), "outputLanguage": "Japanese" } }),
    );
    plan_new_ticket(&mut s, &w, "Default");
    let p = prompt_of(&w, 2);
    assert!(p.contains("<output-language>Japanese</output-language>") && !p.contains("pt-BR"));
}

#[test]
fn memory_entries_reach_the_prompt_unless_memory_is_off() {
    let w = World::new();
    fake_claude_sequence(&w, &["demo"]);
    let mut s = started(&w);
    plan_new_ticket(&mut s, &w, "Empty memory");
    let empty = prompt_of(&w, 1);
    assert!(!empty.contains("<project-memory>") && empty.contains("\"memorySuggestions\""));
    s.ok(
        "planwire/memory/add",
        json!({ "root": w.root(), "text": "Tests wait on conditions." }),
    );
    s.ok(
        "planwire/memory/add",
        json!({ "root": w.root(), "text": "SQLite is bundled." }),
    );
    plan_new_ticket(&mut s, &w, "With memory");
    let with = prompt_of(&w, 2);
    let newest = with.find("- SQLite is bundled.").expect("the newest entry");
    let older = with.find("- Tests wait on conditions.").expect("the older entry");
    assert!(
        with.find("<project-memory>").unwrap() < newest && newest < older,
        "{with}"
    );
    assert!(
        older < with.find("<ticket-title>").unwrap(),
        "memory comes before the task"
    );

    // With memory off, the prompt has no memory and asks for no suggestions.
    s.ok(
        "planwire/setProjectSettings",
        json!({ "root": w.root(), "memoryEnabled": false }),
    );
    plan_new_ticket(&mut s, &w, "Memory off");
    let off = prompt_of(&w, 3);
    assert!(!off.contains("<project-memory>") && !off.contains("memorySuggestions"));
}

#[test]
fn accepted_memory_suggestions_reach_the_next_prompt() {
    let w = World::new();
    let keep = "The CLI is built with clap; new flags go in src/cli.";
    let drop_it = "The project has no CI yet.";
    let script = suggesting_script(&w, &[keep, drop_it]);
    fake_claude_sequence(&w, &[&script, "demo"]);
    let mut s = started(&w);
    s.ok(
        "planwire/memory/add",
        json!({ "root": w.root(), "text": "Tests wait on conditions." }),
    );
    let (ticket, _) = plan_new_ticket(&mut s, &w, "First");
    let first = prompt_of(&w, 1);
    assert!(first.contains("<project-memory>") && first.contains("- Tests wait on conditions."));
    assert!(
        first.contains("\"memorySuggestions\""),
        "the prompt asks for suggestions"
    );

    let listed = s.ok("planwire/memory/list", json!({ "root": w.root() }));
    let suggestions = listed["suggestions"].as_array().unwrap().clone();
    let texts: Vec<&str> = suggestions.iter().map(|v| v["text"].as_str().unwrap()).collect();
    assert_eq!(texts, [drop_it, keep], "newest first: {listed}");
    assert!(suggestions
        .iter()
        .all(|v| v["status"] == "open" && v["ticketId"] == ticket));
    let on_ticket = s.ok("planwire/getTicket", json!({ "ticketId": ticket }));
    assert_eq!(on_ticket["memorySuggestions"].as_array().unwrap().len(), 2);
    assert_eq!(on_ticket["memorySuggestions"][0]["text"], keep);

    let entry = s.ok(
        "planwire/memory/accept",
        json!({ "suggestionId": suggestions[1]["id"] }),
    );
    assert_eq!((&entry["text"], &entry["source"]), (&json!(keep), &json!("suggestion")));
    let rejected = s.ok(
        "planwire/memory/reject",
        json!({ "suggestionId": suggestions[0]["id"] }),
    );
    assert_eq!(rejected["status"], "rejected");
    let again = s.err(
        "planwire/memory/accept",
        json!({ "suggestionId": suggestions[0]["id"] }),
    );
    assert_eq!(
        (&again["code"], &again["data"]["kind"]),
        (&json!(-32014), &json!("conflict"))
    );
    let statuses: Vec<Value> = s.ok("planwire/getTicket", json!({ "ticketId": ticket }))["memorySuggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["status"].clone())
        .collect();
    assert_eq!(statuses, [json!("accepted"), json!("rejected")]);

    // The next run's prompt carries the accepted suggestion, newest first, and not the rejected one.
    plan_new_ticket(&mut s, &w, "Second");
    let next = prompt_of(&w, 2);
    let memory = &next[next.find("<project-memory>").unwrap()..next.find("</project-memory>").unwrap()];
    assert!(
        memory.find(keep).unwrap() < memory.find("Tests wait on conditions.").unwrap(),
        "{memory}"
    );
    assert!(!next.contains(drop_it));
}
