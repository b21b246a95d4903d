//! Task-augmented `tools/call` (MCP 2025-11-25, "Tasks"): when the client puts `task` in a
//! call of a tool whose `execution.taskSupport` is `optional` (`plan`, `answer`,
//! `breakdown`), the call answers at once with the task, the tool runs on, and the client
//! polls `tasks/get`, waits on `tasks/result`, lists with `tasks/list` or stops it with
//! `tasks/cancel` (a `planwire/stop`: it answers once the planner's process group is gone).
//! An elicitation of the task carries its id in `_meta` and puts it in `input_required`.
//! Progress notifications keep the call's progress token.
//!
//! The pinned rmcp models the tasks extension of revision 2026-07-28 (SEP-2663: `ttlMs`,
//! `tasks/update`, no `tasks/result`), so the 2025-11-25 shapes are written here.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use planwire_protocol::ErrorCode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::watch;

use super::{invalid, Mcp};
use crate::transport::{Outbox, RequestId, ResponseError};

/// `_meta` key that ties a message to its task.
pub(super) const RELATED: &str = "io.modelcontextprotocol/related-task";
/// A tool's `execution` when it may run as a task.
pub(super) static OPTIONAL: LazyLock<Value> = LazyLock::new(|| json!({ "taskSupport": "optional" }));
/// How long a task is kept when the client asks for no `ttl` (and at most).
const DEFAULT_TTL: Duration = Duration::from_secs(3600);
const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
/// The polling interval suggested to clients.
const POLL_MS: u64 = 1000;

/// `capabilities.tasks` of the server.
pub(super) fn server_capability() -> Value {
    json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } })
}

/// The `task` of a `tools/call`: `Some(ttl)` when the client asked for a task.
pub(super) fn requested(params: &Value) -> Option<Option<u64>> {
    params
        .get("task")
        .filter(|t| t.is_object())
        .map(|t| t.get("ttl").and_then(Value::as_u64))
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    fn terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }
}

/// A task as 2025-11-25 has it on the wire.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct Task {
    task_id: String,
    status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_message: Option<String>,
    created_at: String,
    last_updated_at: String,
    /// Milliseconds from creation the task is kept.
    ttl: Option<u64>,
    poll_interval: u64,
}

struct Entry {
    task: Task,
    created: Instant,
    ttl: Duration,
    cancel: watch::Sender<bool>,
    /// The call's result once it has ended.
    result: watch::Receiver<Option<Result<Value, ResponseError>>>,
}

type Map = Arc<Mutex<HashMap<String, Entry>>>;

#[derive(Default)]
pub(super) struct Tasks {
    map: Map,
}

/// What the running call knows of its task.
pub(super) struct Handle {
    id: String,
    map: Map,
    out: Outbox,
}

impl Handle {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `input_required` while the person is asked, `working` again after.
    pub async fn input_required(&self, waiting: bool) {
        let (from, to, message) = if waiting {
            (Status::Working, Status::InputRequired, "Waiting for your answer")
        } else {
            (Status::InputRequired, Status::Working, "Planning")
        };
        let changed = update(&self.map, &self.id, |t| {
            (t.status == from).then(|| {
                t.status = to;
                t.status_message = Some(message.to_owned());
            })
        });
        if let Some(task) = changed {
            self.out.notify("notifications/tasks/status", task).await;
        }
    }
}

/// Changes a task with `f` (which may decline); returns it as changed.
fn update(map: &Map, id: &str, f: impl FnOnce(&mut Task) -> Option<()>) -> Option<Task> {
    let mut map = map.lock().expect("tasks");
    let entry = map.get_mut(id)?;
    f(&mut entry.task)?;
    entry.task.last_updated_at = crate::util::now();
    Some(entry.task.clone())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskRef {
    task_id: String,
}

impl Tasks {
    /// Starts `run` as a task; returns the `CreateTaskResult`.
    pub fn create<F, Fut>(&self, mcp: &Arc<Mcp>, ttl: Option<u64>, request: &RequestId, run: F) -> Value
    where
        F: FnOnce(Handle, watch::Receiver<bool>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Value, ResponseError>> + Send + 'static,
    {
        self.sweep();
        let ttl = ttl.map(Duration::from_millis).unwrap_or(DEFAULT_TTL).min(MAX_TTL);
        let now = crate::util::now();
        let task = Task {
            task_id: uuid::Uuid::new_v4().to_string(),
            status: Status::Working,
            status_message: Some("Planning".to_owned()),
            created_at: now.clone(),
            last_updated_at: now,
            ttl: Some(ttl.as_millis() as u64),
            poll_interval: POLL_MS,
        };
        let (cancel, cancel_rx) = watch::channel(false);
        let (result_tx, result) = watch::channel(None);
        let id = task.task_id.clone();
        self.map.lock().expect("tasks").insert(
            id.clone(),
            Entry {
                task: task.clone(),
                created: Instant::now(),
                ttl,
                cancel,
                result,
            },
        );
        tracing::debug!("request {request} runs as task {id}");
        let handle = Handle {
            id: id.clone(),
            map: self.map.clone(),
            out: mcp.out.clone(),
        };
        let (map, out) = (self.map.clone(), mcp.out.clone());
        tokio::spawn(async move {
            let result = run(handle, cancel_rx).await;
            let ok = result.is_ok();
            let _ = result_tx.send(Some(result));
            let changed = update(&map, &id, |t| {
                (!t.status.terminal()).then(|| {
                    t.status = if ok { Status::Completed } else { Status::Failed };
                    t.status_message = None;
                })
            });
            if let Some(task) = changed {
                out.notify("notifications/tasks/status", task).await;
            }
        });
        let immediate = "planwire is planning in the background; the plan arrives as this task's result.";
        json!({ "task": task, "_meta": { "io.modelcontextprotocol/model-immediate-response": immediate } })
    }

    /// `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`.
    pub async fn answer(&self, _mcp: &Mcp, method: &str, params: Value) -> Result<Value, ResponseError> {
        self.sweep();
        if method == "tasks/list" {
            let mut tasks: Vec<(Instant, Task)> = self
                .map
                .lock()
                .expect("tasks")
                .values()
                .map(|e| (e.created, e.task.clone()))
                .collect();
            tasks.sort_by_key(|(created, _)| *created);
            let tasks: Vec<Task> = tasks.into_iter().map(|(_, t)| t).collect();
            return Ok(json!({ "tasks": tasks }));
        }
        let TaskRef { task_id } = super::parse(method, params)?;
        let unknown = || invalid(format!("unknown task {task_id}"));
        match method {
            "tasks/get" => {
                let map = self.map.lock().expect("tasks");
                Ok(json!(map.get(&task_id).ok_or_else(unknown)?.task))
            }
            "tasks/result" => {
                let mut result = {
                    let map = self.map.lock().expect("tasks");
                    map.get(&task_id).ok_or_else(unknown)?.result.clone()
                };
                let done = result
                    .wait_for(Option::is_some)
                    .await
                    .map_err(|_| ResponseError::new(ErrorCode::InternalError, "the task ended without a result"))?
                    .clone()
                    .expect("waited for it");
                let mut value = done?;
                value["_meta"][RELATED] = json!({ "taskId": task_id });
                Ok(value)
            }
            "tasks/cancel" => {
                let mut result = {
                    let mut map = self.map.lock().expect("tasks");
                    let entry = map.get_mut(&task_id).ok_or_else(unknown)?;
                    if entry.task.status.terminal() {
                        return Err(invalid(format!(
                            "task {task_id} is already {}",
                            json!(entry.task.status).as_str().unwrap_or("done")
                        )));
                    }
                    entry.task.status = Status::Cancelled;
                    entry.task.status_message = Some("Stopped: the planner's processes are gone.".to_owned());
                    entry.task.last_updated_at = crate::util::now();
                    let _ = entry.cancel.send(true);
                    entry.result.clone()
                };
                // The stop answers once the planner's process group is gone.
                let _ = result.wait_for(Option::is_some).await;
                let map = self.map.lock().expect("tasks");
                Ok(json!(map.get(&task_id).ok_or_else(unknown)?.task))
            }
            _ => unreachable!("dispatch sends only task methods"),
        }
    }

    /// Forgets ended tasks whose ttl has passed.
    fn sweep(&self) {
        self.map
            .lock()
            .expect("tasks")
            .retain(|_, e| !e.task.status.terminal() || e.created.elapsed() < e.ttl);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_requested_by_an_object() {
        assert_eq!(
            requested(&json!({"name": "plan", "task": {"ttl": 5000}})),
            Some(Some(5000))
        );
        assert_eq!(requested(&json!({"name": "plan", "task": {}})), Some(None));
        assert_eq!(requested(&json!({"name": "plan"})), None);
        assert_eq!(requested(&json!({"name": "plan", "task": true})), None);
    }

    #[test]
    fn tasks_have_the_2025_11_25_shape() {
        let t = Task {
            task_id: "t".into(),
            status: Status::InputRequired,
            status_message: None,
            created_at: "2025-11-25T10:30:00Z".into(),
            last_updated_at: "2025-11-25T10:30:00Z".into(),
            ttl: Some(60000),
            poll_interval: 1000,
        };
        let v = json!(t);
        assert_eq!(v["status"], "input_required");
        assert_eq!(v["ttl"], 60000);
        assert_eq!(v["pollInterval"], 1000);
        assert!(v.get("statusMessage").is_none());
    }
}
