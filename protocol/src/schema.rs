//! The JSON Schema of the whole protocol (draft 2020-12), generated from the types above.
//!
//! One document, so a client in any language can trust one file: `$defs` holds every type,
//! `x-requests` and `x-notifications` map each method name to its `params` (and `result`) as
//! `$ref`s into `$defs`, `x-lifecycle` covers LSP's `initialize` / `initialized` /
//! `shutdown` / `exit`, and `x-error-codes` lists every `error.code` with its name.
//! `schema.json` beside this crate is the committed output of the `planwire-schema` binary;
//! `tests/schema_drift.rs` fails when it no longer matches the types.

use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::JsonSchema;
use serde_json::{json, Map, Value};

use crate::*;

/// The command that rewrites the committed schema, from the workspace root.
pub const REGENERATE: &str = "cargo run -p planwire-protocol --bin planwire-schema > protocol/schema.json";

/// The protocol's JSON Schema document.
pub fn schema() -> Value {
    let mut tables = Tables {
        g: SchemaSettings::draft2020_12().into_generator(),
        requests: Map::new(),
        notifications: Map::new(),
    };
    visit_methods(&mut tables);
    let Tables {
        mut g,
        requests,
        notifications,
    } = tables;

    let init_options = g.subschema_for::<InitializationOptions>();
    let init_result = g.subschema_for::<InitializeResult>();
    // Types a client names on their own, whether or not a method reaches them directly.
    named::<Ticket>(&mut g);
    named::<Run>(&mut g);
    named::<Question>(&mut g);
    named::<Message>(&mut g);
    named::<TranscriptEvent>(&mut g);
    named::<EventBody>(&mut g);
    named::<TicketStatus>(&mut g);
    named::<RunStatus>(&mut g);
    named::<ServerCapabilities>(&mut g);
    named::<ErrorCode>(&mut g);
    named::<ResponseError>(&mut g);
    let defs = g.take_definitions(true);

    let lifecycle = json!({
        "initialize": {
            "kind": "request",
            "description": "LSP `initialize`. Of LSP's InitializeParams planwire reads `initializationOptions` and \
                `capabilities.window.workDoneProgress`; other fields are allowed and ignored. Any other request \
                before it gets -32002; a second `initialize` gets -32600.",
            "params": {
                "type": "object",
                "properties": {
                    "initializationOptions": { "anyOf": [init_options, { "type": "null" }] },
                    "capabilities": {
                        "type": "object",
                        "properties": {
                            "window": {
                                "type": "object",
                                "properties": {
                                    "workDoneProgress": {
                                        "type": "boolean",
                                        "description": "When true, runs report LSP work-done progress with tokens \
                                            `planwire/run/<runId>`."
                                    }
                                }
                            }
                        }
                    }
                }
            },
            "result": init_result,
        },
        "initialized": {
            "kind": "notification",
            "description": "LSP `initialized`, from the client. Accepted and ignored.",
        },
        "shutdown": {
            "kind": "request",
            "description": "Stops this server's own runs (recorded as `cancelled`), then answers null. Any later \
                request gets -32600.",
            "result": { "type": "null" },
        },
        "exit": {
            "kind": "notification",
            "description": "Ends the process: exit code 0 after `shutdown`, else 1. End of input without `shutdown` \
                also exits 1, after stopping this server's own runs.",
        },
    });

    let error_codes: Vec<Value> = ErrorCode::ALL
        .iter()
        .map(|&c| {
            let name = serde_json::to_value(c).expect("an error code serializes");
            let description = variant_description(&defs["ErrorCode"], &name);
            json!({ "code": c.code(), "name": name, "dataKind": c.kind(), "description": description })
        })
        .collect();

    let doc = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "planwire protocol",
        "description": "JSON-RPC 2.0 over LSP base framing. Method names key `x-requests` (params and result) and \
            `x-notifications` (params, server to client); every `$ref` points into `$defs`. Fields are camelCase; \
            status values are snake_case. The schemas describe what each type accepts; see protocol/README.md for \
            the behaviour.",
        "x-protocol-version": PROTOCOL_VERSION,
        "x-lifecycle": lifecycle,
        "x-requests": requests,
        "x-notifications": notifications,
        "x-error-codes": error_codes,
        "$defs": defs,
    });
    sorted(doc)
}

/// [`schema`] as the committed file holds it: pretty, keys sorted, one trailing newline.
pub fn schema_json() -> String {
    let mut text = serde_json::to_string_pretty(&schema()).expect("the schema serializes");
    text.push('\n');
    text
}

struct Tables {
    g: SchemaGenerator,
    requests: Map<String, Value>,
    notifications: Map<String, Value>,
}

impl MethodVisitor for Tables {
    fn request<R: Request>(&mut self) {
        let params = self.g.subschema_for::<R::Params>();
        let result = self.g.subschema_for::<R::Result>();
        let entry = json!({ "description": doc_text(R::DOC), "params": params, "result": result });
        self.requests.insert(R::METHOD.to_owned(), entry);
    }

    fn notification<N: Notification>(&mut self) {
        let params = self.g.subschema_for::<N::Params>();
        let entry = json!({ "description": doc_text(N::DOC), "params": params });
        self.notifications.insert(N::METHOD.to_owned(), entry);
    }
}

/// A `///` comment as captured by the method macros: one leading space per line.
fn doc_text(doc: &str) -> String {
    let lines: Vec<&str> = doc.lines().map(|l| l.strip_prefix(' ').unwrap_or(l)).collect();
    lines.join("\n").trim().to_owned()
}

/// The doc comment of one variant of a unit enum's schema (`oneOf` of `const`s).
fn variant_description(enum_schema: &Value, name: &Value) -> Value {
    enum_schema["oneOf"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| &v["const"] == name)
        .map_or(Value::Null, |v| v["description"].clone())
}

/// Keys in sorted order at every level, whatever serde_json's map type keeps.
fn sorted(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// Puts `T` into `$defs`.
fn named<T: JsonSchema>(g: &mut SchemaGenerator) {
    g.subschema_for::<T>();
}
