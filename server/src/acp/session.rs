//! ACP sessions: a ticket, or a draft that becomes one at its first prompt.
//!
//! A session made by `session/new` is a draft rooted at its `cwd`, with the id
//! `draft-<uuid>`: it holds no ticket yet (an ACP client opens sessions freely; a ticket
//! appears only once there is something to plan). Its first prompt creates ticket N, and
//! from then on the session answers to `ticket-N` too, which is the id `session/list`
//! shows and a later process loads. A session's planner and model are its config options.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode, SessionModeState,
};
use planwire_protocol::{PlannerInfo, QuestionId, RunId, TicketId};
use tokio::sync::watch;

use crate::transport::ResponseError;

/// The one mode a planwire session has.
pub const PLAN_MODE: &str = "plan";

pub type SessionId = String;

/// The built-in scripts of the `script` planner, offered as its models.
const SCRIPTS: &[&str] = &["demo", "slow", "questions", "ask", "exitplan", "breakdown", "fail"];

/// The session id of a ticket.
pub fn ticket_session(ticket: TicketId) -> String {
    format!("ticket-{ticket}")
}

/// The ticket a session id names, if it names one.
pub fn ticket_of(id: &str) -> Option<TicketId> {
    id.strip_prefix("ticket-")?.parse().ok()
}

pub struct Session {
    /// The id the client was given (`draft-…` or `ticket-N`).
    id: String,
    pub cwd: String,
    state: Mutex<State>,
    /// One prompt at a time.
    pub turn: tokio::sync::Mutex<()>,
    /// Bumped by `session/cancel`.
    cancel: watch::Sender<u64>,
}

#[derive(Debug, Clone)]
pub struct State {
    pub ticket: Option<TicketId>,
    pub tool: String,
    pub model: Option<String>,
    /// A question the last turn ended on, shown as text: the next prompt answers it.
    pub text_question: Option<(QuestionId, usize)>,
    /// The highest seq the client has of each run.
    pub seen: HashMap<RunId, u64>,
}

impl Session {
    pub fn new(cwd: String, ticket: Option<TicketId>, (tool, model): (String, Option<String>)) -> Arc<Session> {
        let id = match ticket {
            Some(t) => ticket_session(t),
            None => format!("draft-{}", uuid::Uuid::new_v4()),
        };
        Arc::new(Session {
            id,
            cwd,
            state: Mutex::new(State {
                ticket,
                tool,
                model,
                text_question: None,
                seen: HashMap::new(),
            }),
            turn: tokio::sync::Mutex::new(()),
            cancel: watch::channel(0).0,
        })
    }

    /// The id the client knows this session by.
    pub fn acp_id(&self) -> String {
        self.id.clone()
    }

    /// Its key in the session table.
    pub fn key(&self) -> String {
        self.id.clone()
    }

    pub fn state(&self) -> State {
        self.state.lock().expect("session").clone()
    }

    pub fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().expect("session"))
    }

    pub fn cancel(&self) {
        self.cancel.send_modify(|n| *n += 1);
    }

    pub fn cancelled(&self) -> watch::Receiver<u64> {
        let mut rx = self.cancel.subscribe();
        rx.mark_unchanged();
        rx
    }

    /// The planner and model options, with the planners this machine has.
    pub fn config_options(&self, planners: &[PlannerInfo]) -> Vec<SessionConfigOption> {
        let state = self.state();
        let mut tools: Vec<SessionConfigSelectOption> = planners
            .iter()
            .filter(|p| p.supported || p.tool == state.tool)
            .map(|p| {
                let name = match &p.version {
                    Some(v) if p.tool != "script" => format!("{} ({v})", p.tool),
                    _ => p.tool.clone(),
                };
                SessionConfigSelectOption::new(p.tool.clone(), name)
            })
            .collect();
        if !tools.iter().any(|o| o.value.0.as_ref() == state.tool) {
            tools.push(SessionConfigSelectOption::new(state.tool.clone(), state.tool.clone()));
        }
        let mut models: Vec<SessionConfigSelectOption> =
            vec![SessionConfigSelectOption::new("default", "The planner's default")];
        if state.tool == "script" {
            models = SCRIPTS
                .iter()
                .map(|s| SessionConfigSelectOption::new(*s, format!("script: {s}")))
                .collect();
        }
        let current_model = match (&state.model, state.tool.as_str()) {
            (Some(m), _) => m.clone(),
            (None, "script") => "demo".to_owned(),
            (None, _) => "default".to_owned(),
        };
        if !models.iter().any(|o| o.value.0.as_ref() == current_model) {
            models.push(SessionConfigSelectOption::new(
                current_model.clone(),
                current_model.clone(),
            ));
        }
        vec![
            SessionConfigOption::select("planner", "Planner", state.tool, tools)
                .description("The coding-agent CLI that plans, read-only"),
            SessionConfigOption::select("model", "Model", current_model, models)
                .category(SessionConfigOptionCategory::Model),
        ]
    }

    /// `session/set_config_option`: `planner` or `model`.
    pub fn set_option(&self, id: &str, value: &str, planners: &[PlannerInfo]) -> Result<(), ResponseError> {
        match id {
            "planner" => {
                let known = planners.iter().any(|p| p.tool == value)
                    || value.strip_prefix("acp:").is_some_and(|n| !n.is_empty());
                if !known {
                    let names: Vec<&str> = planners.iter().map(|p| p.tool.as_str()).collect();
                    return Err(super::invalid(format!(
                        "unknown planner `{value}`; known: {}",
                        names.join(", ")
                    )));
                }
                self.with_state(|s| {
                    if s.tool != value {
                        s.tool = value.to_owned();
                        s.model = None;
                    }
                });
                Ok(())
            }
            "model" => {
                self.with_state(|s| s.model = (value != "default" && !value.is_empty()).then(|| value.to_owned()));
                Ok(())
            }
            other => Err(super::invalid(format!(
                "unknown config option `{other}` (planwire has `planner` and `model`)"
            ))),
        }
    }
}

/// planwire's one mode.
pub fn modes() -> SessionModeState {
    SessionModeState::new(
        PLAN_MODE,
        vec![SessionMode::new(PLAN_MODE, "Plan").description("Plan tickets read-only; nothing is changed")],
    )
}

/// A session by the id the client used: its own id, or its ticket's.
pub fn lookup(sessions: &HashMap<SessionId, Arc<Session>>, id: &str) -> Option<Arc<Session>> {
    if let Some(s) = sessions.get(id) {
        return Some(s.clone());
    }
    let ticket = ticket_of(id)?;
    sessions.values().find(|s| s.state().ticket == Some(ticket)).cloned()
}
