//! The committed `schema.json` and the examples of `README.md` must match the types.
//!
//! Every ```json block of the README is a stream of JSON-RPC messages. Each is checked
//! against the type of its method: params may only use known fields (with the values they
//! parse to), results and notifications must round-trip exactly, and errors must use a
//! known code with the right `data.kind`. Responses find their method through the id of
//! the request before them. A request answered with -32602 shows bad params on purpose: its
//! params are not checked.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use planwire_protocol::schema::{schema, schema_json, REGENERATE};
use planwire_protocol::{
    visit_methods, ErrorCode, InitializationOptions, InitializeResult, MethodVisitor, Notification, Request,
    ResponseError,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

fn crate_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(crate_file(name)).unwrap_or_else(|e| panic!("cannot read protocol/{name}: {e}"))
}

#[test]
fn committed_schema_matches_the_types() {
    let committed = std::fs::read_to_string(crate_file("schema.json"))
        .unwrap_or_default()
        .replace("\r\n", "\n");
    let fresh = schema_json();
    if committed != fresh {
        let line = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| committed.lines().count().min(fresh.lines().count()) + 1, |i| i + 1);
        panic!(
            "protocol/schema.json is out of date with the types in protocol/src (first difference at line \
             {line}).\nRegenerate it from the workspace root:\n\n    {REGENERATE}\n"
        );
    }
}

#[test]
fn every_declared_method_is_in_the_schema() {
    let schema = schema();
    let source = read("src/methods.rs");
    let declared: BTreeSet<&str> = source
        .split("\"planwire/")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .collect();
    assert!(declared.len() >= 12, "methods.rs declares {declared:?}");
    for name in declared {
        let method = format!("planwire/{name}");
        let request = &schema["x-requests"][&method];
        let notification = &schema["x-notifications"][&method];
        assert!(
            request.is_object() || notification.is_object(),
            "{method} is declared in methods.rs but missing from the schema: add it to `visit_methods`"
        );
        let entry = if request.is_object() { request } else { notification };
        assert!(
            entry["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{method} needs a /// line"
        );
    }
}

#[test]
fn schema_documents_every_error_code() {
    let schema = schema();
    let table = schema["x-error-codes"].as_array().expect("x-error-codes");
    assert_eq!(table.len(), ErrorCode::ALL.len());
    for (row, &code) in table.iter().zip(ErrorCode::ALL) {
        assert_eq!(row["code"], code.code());
        assert_eq!(row["dataKind"], serde_json::json!(code.kind()));
        assert!(row["description"].as_str().is_some_and(|d| !d.is_empty()), "{row}");
    }
}

type Check = fn(&Value) -> Result<(), String>;

/// What a message of each method must look like.
#[derive(Default)]
struct Checks {
    /// Method → (params, result).
    requests: HashMap<&'static str, (Check, Check)>,
    notifications: HashMap<&'static str, Check>,
}

impl MethodVisitor for Checks {
    fn request<R: Request>(&mut self) {
        self.requests
            .insert(R::METHOD, (params::<R::Params>, exact::<R::Result>));
    }

    fn notification<N: Notification>(&mut self) {
        self.notifications.insert(N::METHOD, exact::<N::Params>);
    }
}

impl Checks {
    fn all() -> Checks {
        let mut c = Checks::default();
        visit_methods(&mut c);
        c.requests
            .insert("initialize", (initialize_params, exact::<InitializeResult>));
        c.requests.insert("shutdown", (anything, null));
        c.requests
            .insert("window/workDoneProgress/create", (progress_token, null));
        c.notifications.insert("initialized", anything);
        c.notifications.insert("exit", anything);
        c.notifications.insert("$/cancelRequest", cancel_params);
        c.notifications.insert("$/progress", progress_params);
        c
    }
}

/// Params: only known fields, each with the value it parses to.
fn params<T: DeserializeOwned + Serialize>(v: &Value) -> Result<(), String> {
    let v = if v.is_null() {
        Value::Object(Default::default())
    } else {
        v.clone()
    };
    let parsed: T = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(parsed).map_err(|e| e.to_string())?;
    subset(&v, &back, "params")
}

/// Results and notifications: exactly what the server would send.
fn exact<T: DeserializeOwned + Serialize>(v: &Value) -> Result<(), String> {
    let parsed: T = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(parsed).map_err(|e| e.to_string())?;
    if &back == v {
        Ok(())
    } else {
        Err(format!(
            "does not round-trip; the types give\n{}",
            serde_json::to_string_pretty(&back).unwrap()
        ))
    }
}

fn subset(example: &Value, full: &Value, at: &str) -> Result<(), String> {
    match (example, full) {
        (Value::Object(e), Value::Object(f)) => e.iter().try_for_each(|(k, ev)| match f.get(k) {
            Some(fv) => subset(ev, fv, &format!("{at}.{k}")),
            None => Err(format!("{at}.{k} is not a field of the type")),
        }),
        (Value::Array(e), Value::Array(f)) if e.len() == f.len() => e
            .iter()
            .zip(f)
            .enumerate()
            .try_for_each(|(i, (ev, fv))| subset(ev, fv, &format!("{at}[{i}]"))),
        _ if example == full => Ok(()),
        _ => Err(format!("{at} is {example} but parses to {full}")),
    }
}

fn anything(_: &Value) -> Result<(), String> {
    Ok(())
}

fn null(v: &Value) -> Result<(), String> {
    v.is_null()
        .then_some(())
        .ok_or_else(|| format!("expected null, got {v}"))
}

fn initialize_params(v: &Value) -> Result<(), String> {
    match v.get("initializationOptions") {
        None | Some(Value::Null) => Ok(()),
        Some(o) => params::<InitializationOptions>(o),
    }
}

fn progress_token(v: &Value) -> Result<(), String> {
    let token = v["token"].as_str().ok_or("no string token")?;
    let run = token
        .strip_prefix("planwire/run/")
        .ok_or("token is not planwire/run/<runId>")?;
    run.parse::<i64>()
        .map(|_| ())
        .map_err(|_| format!("token {token} does not end in a run id"))
}

fn progress_params(v: &Value) -> Result<(), String> {
    progress_token(v)?;
    match v["value"]["kind"].as_str() {
        Some("begin") if v["value"]["title"].is_string() => Ok(()),
        Some("report" | "end") => Ok(()),
        _ => Err(format!("not a work-done progress value: {}", v["value"])),
    }
}

fn cancel_params(v: &Value) -> Result<(), String> {
    (v["id"].is_i64() || v["id"].is_string())
        .then_some(())
        .ok_or_else(|| "no id".into())
}

fn error_object(v: &Value) -> Result<(), String> {
    let e: ResponseError = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    let code = ErrorCode::from_code(e.code).ok_or_else(|| format!("unknown error code {}", e.code))?;
    let kind = e.data.as_ref().map(|d| d.kind);
    match (code.kind(), kind) {
        (None, None) => Ok(()),
        (Some(_), Some(k)) if k == code => Ok(()),
        (want, got) => Err(format!("code {} needs data.kind {want:?}, has {got:?}", e.code)),
    }
}

/// The fenced code blocks of a markdown text: (info string, body, line of the fence).
fn code_blocks(markdown: &str) -> Vec<(String, String, usize)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, String, usize)> = None;
    for (n, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => open = Some((info.trim().to_owned(), String::new(), n + 1)),
            (Some(_), Some(_)) => blocks.push(open.take().expect("an open block")),
            (Some((_, body, _)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "README.md has an unclosed code block");
    blocks
}

#[derive(Default)]
struct Seen {
    requests: BTreeSet<String>,
    responses: BTreeSet<String>,
    notifications: BTreeSet<String>,
    event_kinds: BTreeSet<String>,
}

/// A request seen in the README: its method, and its params until a response decides
/// whether they must be valid.
struct Asked {
    method: String,
    params: Option<Value>,
}

fn check_params(checks: &Checks, method: &str, params: &Value) -> Result<(), String> {
    let (check, _) = checks.requests[method];
    check(params).map_err(|e| format!("{method} params: {e}"))
}

fn check_message(m: &Value, checks: &Checks, ids: &mut HashMap<String, Asked>, seen: &mut Seen) -> Result<(), String> {
    if m["jsonrpc"] != "2.0" {
        return Err("jsonrpc must be \"2.0\"".into());
    }
    let id = m.get("id").map(|id| id.to_string());
    match (m["method"].as_str(), id) {
        (Some(method), Some(id)) => {
            if !checks.requests.contains_key(method) {
                return Err(format!("unknown request {method}"));
            }
            let earlier = ids.insert(
                id,
                Asked {
                    method: method.to_owned(),
                    params: Some(m["params"].clone()),
                },
            );
            if let Some(Asked {
                method,
                params: Some(params),
            }) = earlier
            {
                check_params(checks, &method, &params)?;
            }
            seen.requests.insert(method.to_owned());
        }
        (Some(method), None) => {
            let check = checks
                .notifications
                .get(method)
                .ok_or_else(|| format!("unknown notification {method}"))?;
            check(&m["params"]).map_err(|e| format!("{method} params: {e}"))?;
            seen.notifications.insert(method.to_owned());
            if method == "planwire/transcript" {
                collect_kinds(&m["params"]["events"], seen);
            }
        }
        (None, Some(id)) => {
            let asked = ids.get_mut(&id);
            let method = asked.as_ref().map(|a| a.method.clone());
            let params = asked.and_then(|a| a.params.take());
            if let Some(error) = m.get("error") {
                error_object(error).map_err(|e| format!("error response to id {id}: {e}"))?;
                if error["code"] != ErrorCode::InvalidParams.code() {
                    if let (Some(method), Some(params)) = (&method, &params) {
                        check_params(checks, method, params)?;
                    }
                }
            } else {
                if let (Some(method), Some(params)) = (&method, &params) {
                    check_params(checks, method, params)?;
                }
                let method = method
                    .clone()
                    .ok_or_else(|| format!("a result for id {id} with no request before it"))?;
                let (_, check) = checks.requests[method.as_str()];
                check(m.get("result").ok_or("a response needs result or error")?)
                    .map_err(|e| format!("{method} result: {e}"))?;
                if method == "planwire/getTranscript" {
                    collect_kinds(&m["result"]["events"], seen);
                }
            }
            if let Some(method) = method {
                seen.responses.insert(method);
            }
        }
        (None, None) => return Err("neither a method nor an id".into()),
    }
    Ok(())
}

fn collect_kinds(events: &Value, seen: &mut Seen) {
    for e in events.as_array().into_iter().flatten() {
        if let Some(kind) = e["kind"].as_str() {
            seen.event_kinds.insert(kind.to_owned());
        }
    }
}

#[test]
fn readme_examples_match_the_types() {
    let readme = read("README.md");
    let checks = Checks::all();
    let mut ids = HashMap::new();
    let mut seen = Seen::default();
    let mut failures = Vec::new();
    for (info, body, line) in code_blocks(&readme) {
        match info.as_str() {
            "json" => {
                for (i, m) in serde_json::Deserializer::from_str(&body)
                    .into_iter::<Value>()
                    .enumerate()
                {
                    let result = m
                        .map_err(|e| format!("not JSON: {e}"))
                        .and_then(|m| check_message(&m, &checks, &mut ids, &mut seen));
                    if let Err(e) = result {
                        failures.push(format!("README.md block at line {line}, message {}: {e}", i + 1));
                    }
                }
            }
            "jsonl" => {
                for l in body.lines().filter(|l| !l.trim().is_empty()) {
                    if !serde_json::from_str::<Value>(l).is_ok_and(|v| v.is_object()) {
                        failures.push(format!("README.md block at line {line}: not a JSON object: {l}"));
                    }
                }
            }
            _ => {}
        }
    }
    for Asked { method, params } in ids.into_values() {
        if let Err(e) = params.map_or(Ok(()), |p| check_params(&checks, &method, &p)) {
            failures.push(format!("README.md, a request without a response: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "README examples no longer match the types:\n\n{}",
        failures.join("\n\n")
    );

    let schema = schema();
    for method in schema["x-requests"].as_object().expect("x-requests").keys() {
        assert!(
            seen.requests.contains(method),
            "README.md has no example request of {method}"
        );
        assert!(
            seen.responses.contains(method),
            "README.md has no example response to {method}"
        );
    }
    for method in schema["x-notifications"].as_object().expect("x-notifications").keys() {
        assert!(
            seen.notifications.contains(method),
            "README.md has no example of {method}"
        );
    }
    let kinds: BTreeSet<String> = schema["$defs"]["EventBody"]["oneOf"]
        .as_array()
        .expect("EventBody is a oneOf")
        .iter()
        .filter_map(|v| v["properties"]["kind"]["const"].as_str().map(str::to_owned))
        .collect();
    let missing: Vec<_> = kinds.difference(&seen.event_kinds).collect();
    assert!(missing.is_empty(), "README.md shows no event of kinds {missing:?}");
    for code in ErrorCode::ALL {
        assert!(
            readme.contains(&format!("| {} |", code.code())),
            "README.md's error table lacks {}",
            code.code()
        );
    }
}
