//! Planner adapters: one module per CLI, each with the same shape.
//!
//! - detect: find the binary (configured path, else `PATH`) and read its version;
//! - launch: the argv and env of a first or resumed plan, always in read-only / plan mode;
//!   the prompt never passes through a shell and can never be read as a flag;
//! - parse: a stateful [`LineParser`] from the CLI's stream to normalized events;
//! - writable: where the CLI may write under the OS sandbox, each entry with its reason
//!   ([`writable`] asks the adapter of a tool).
//!
//! `handoff` is the one exception to plan mode: the command of an interactive implementation
//! session, which planwire hands to the editor and never runs itself.
//!
//! An adapter knows a CLI's argv and line format and nothing else. What the parsers share
//! (the frame of `parse_line`, held text, subagent bookkeeping, summaries, raw lines, API
//! error classes) is in the helpers at the end of this file.

pub mod acp;
pub mod claude;
pub mod codex;
pub mod detect;
pub mod driver;
pub mod handoff;
pub mod initiative;
pub mod instructions;
pub mod lines;
pub mod opencode;
pub mod plan;
pub mod prompt;
pub mod script;
pub mod writable;

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use planwire_protocol::{ErrorKind, EventBody, SubagentPhase};
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::config::Config;

/// One normalized event as an adapter's parser produces it, before it has a seq.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedEvent {
    /// `None` for the main agent; otherwise a key naming the subagent (the CLI's id of the
    /// tool call that started it). The runner maps keys to agent-run rows.
    pub agent: Option<String>,
    pub body: EventBody,
}

impl ParsedEvent {
    pub fn main(body: EventBody) -> Self {
        ParsedEvent { agent: None, body }
    }

    /// A `subagent start` under the subagent's own key.
    pub fn subagent_start(key: &str, label: &str) -> Self {
        ParsedEvent {
            agent: Some(key.to_string()),
            body: EventBody::Subagent {
                phase: SubagentPhase::Start,
                label: label.to_string(),
                status: None,
            },
        }
    }

    /// A `subagent end` under the subagent's own key.
    pub fn subagent_end(key: &str, label: &str, status: &str) -> Self {
        ParsedEvent {
            agent: Some(key.to_string()),
            body: EventBody::Subagent {
                phase: SubagentPhase::End,
                label: label.to_string(),
                status: Some(status.to_string()),
            },
        }
    }
}

/// A CLI's stream, line by line, into normalized events.
pub trait LineParser: Send + Sync {
    fn parse_line(&mut self, line: &str) -> Vec<ParsedEvent>;
    /// At end of output.
    fn finish(&mut self) -> Vec<ParsedEvent>;
    fn session_id(&self) -> Option<String>;
    /// The main agent's text, in order, as far back as [`TEXT_TAIL`] (where the plan is
    /// looked for after the final answer).
    fn all_text(&self) -> String;
    /// Main-agent text older than what [`all_text`](Self::all_text) holds was let go (it
    /// is in the store, as the run's `text` events).
    fn text_dropped(&self) -> bool {
        false
    }
    /// The text of the final answer.
    fn final_text(&self) -> String;
    /// The CLI's own error text, when it reported one.
    fn error_message(&self) -> Option<String>;
    /// Requests the CLI made of us on its stdout (Claude's `control_request`), to answer on stdin.
    fn take_control_requests(&mut self) -> Vec<claude::ControlRequest> {
        Vec::new()
    }
    /// Live pieces of text or reasoning seen since the last call, in order: `(agent key,
    /// kind, piece)`. Never stored; the closing event is.
    fn take_deltas(&mut self) -> Vec<(Option<String>, driver::DeltaKind, String)> {
        Vec::new()
    }
    /// The CLI printed its final line (after which an open stdin is closed).
    fn saw_result(&self) -> bool {
        false
    }
    /// Why a run that exited 0 has no final answer, when the adapter can tell (from what it
    /// parsed and the CLI's stderr tail); `None` when there is a final answer or nothing
    /// better to say than the runner's generic "no plan" message.
    fn explain_missing_answer(&self, _stderr_tail: &str) -> Option<String> {
        None
    }
    /// True when the run failed because the provider session to resume does not exist
    /// (the runner then starts fresh).
    fn session_not_found(&self, _stderr_tail: &str) -> bool {
        false
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Claude,
    OpenCode,
    Codex,
    Script,
    /// An ACP agent, `acp:<name>`: a preset or a configured agent (see [`acp`]). The name is
    /// interned, so a tool stays `Copy` and names itself with a `&'static str`.
    Acp(acp::AcpName),
}

impl Tool {
    pub const ALL: [Tool; 4] = [Tool::Claude, Tool::OpenCode, Tool::Codex, Tool::Script];

    pub fn parse(name: &str) -> Option<Tool> {
        match name {
            "claude" => Some(Tool::Claude),
            "opencode" => Some(Tool::OpenCode),
            "codex" => Some(Tool::Codex),
            "script" => Some(Tool::Script),
            _ => name.strip_prefix("acp:").and_then(acp::AcpName::intern).map(Tool::Acp),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Tool::Claude => "claude",
            Tool::OpenCode => "opencode",
            Tool::Codex => "codex",
            Tool::Script => "script",
            Tool::Acp(name) => name.tool_name(),
        }
    }

    /// The binary name searched on `PATH`.
    fn binary(self) -> &'static str {
        match self {
            Tool::Claude => "claude",
            Tool::OpenCode => "opencode",
            Tool::Codex => "codex",
            Tool::Script => "planwire",
            Tool::Acp(name) => name.agent(),
        }
    }

    /// What to do when the CLI is missing.
    pub fn install_hint(self) -> &'static str {
        match self {
            Tool::Claude => "install Claude Code: npm install -g @anthropic-ai/claude-code (or set initializationOptions.planners.claude.path)",
            Tool::OpenCode => "install OpenCode: npm install -g opencode-ai, and put ripgrep (`rg`) on PATH: its grep and glob tools need it (or set initializationOptions.planners.opencode.path)",
            Tool::Codex => "install Codex: npm install -g @openai/codex (or set initializationOptions.planners.codex.path)",
            Tool::Script => "the script planner is built in",
            Tool::Acp(name) => name.install_hint(),
        }
    }

    /// The line parser of a tool whose channel is lines on stdout: Claude Code and the
    /// `script` planner. (OpenCode's server is driven over HTTP, Codex's app-server and ACP
    /// agents over JSON-RPC: their drivers never read lines.)
    pub fn parser(self) -> Box<dyn LineParser> {
        match self {
            Tool::Claude | Tool::Script => Box::new(claude::ClaudeParser::new()),
            Tool::OpenCode | Tool::Codex | Tool::Acp(_) => {
                unreachable!("{} is not driven by lines", self.name())
            }
        }
    }
}

/// Where a tool's binary is: the configured path, else the first match on `PATH`.
///
/// The npm packages of OpenCode and Codex put a launcher on `PATH`, not the CLI itself:
/// Codex's `bin/codex.js` is a node script that spawns the native binary as a child (on
/// Node < 22, without `process.execve`), so signals and the process group would go to node;
/// OpenCode's `bin/opencode.exe` is a 500-byte shell placeholder when npm skipped the
/// postinstall script that hard-links the native binary over it. When the file found (on
/// `PATH` or configured) is not a native executable, the native binary of the platform
/// package installed next to it is used instead ([`native_binary`]); when there is none, the
/// launcher itself.
pub fn locate(tool: Tool, config: &Config) -> Option<PathBuf> {
    match tool {
        Tool::Script => return current_exe(),
        Tool::Acp(name) => return acp::locate(name, config),
        _ => {}
    }
    let found = if let Some(p) = config.planner_paths.get(tool.name()) {
        is_executable(p).then(|| p.clone())?
    } else {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| dir.join(tool.binary()))
            .find(|p| is_executable(p))?
    };
    if matches!(tool, Tool::OpenCode | Tool::Codex) && !is_native(&found) {
        if let Some(native) = native_binary(tool, &found) {
            return Some(native);
        }
    }
    Some(found)
}

/// What a found CLI still needs to work fully, when it is missing: OpenCode's `grep` and
/// `glob` tools run `rg`, and without it on `PATH` they try to download ripgrep (and fail
/// offline).
pub fn missing_requirement(tool: Tool) -> Option<&'static str> {
    if tool != Tool::OpenCode {
        return None;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let has_rg = std::env::split_paths(&path).any(|dir| is_executable(&dir.join("rg")));
    (!has_rg).then_some(
        "ripgrep (`rg`) is not on PATH: OpenCode's grep and glob tools need it \
         (install the ripgrep package)",
    )
}

use crate::util::is_executable;

/// True for an ELF or Mach-O file (false for a script, a placeholder or an unreadable file).
fn is_native(p: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(p).and_then(|mut f| f.read_exact(&mut magic));
    read.is_ok()
        && matches!(
            magic,
            [0x7f, b'E', b'L', b'F'] | [0xcf, 0xfa, 0xed, 0xfe] | [0xce, 0xfa, 0xed, 0xfe] | [0xca, 0xfe, 0xba, 0xbe]
        )
}

/// The native binary of an npm-installed OpenCode or Codex, from its launcher (a symlink in
/// `node_modules/.bin` or the package's own `bin/` file). Candidates, like node's
/// `require.resolve` from the main package: the platform package nested in the main
/// package's `node_modules`, then in every `node_modules` above it (hoisted), then (Codex)
/// the main package's own `vendor/`.
///
/// - Codex: `@openai/codex-<os>-<arch>/vendor/<target triple>/bin/codex`, for example
///   `@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex`.
/// - OpenCode: `opencode-<os>-<arch>/bin/opencode`, or `opencode-<os>-<arch>-baseline/…` (for
///   an x86-64 CPU without AVX2, tried first there).
pub fn native_binary(tool: Tool, launcher: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(launcher).ok()?;
    // <root>/node_modules/<main package>/bin/<file>
    let package = real.parent()?.parent()?;
    let (os, arch) = npm_platform()?;
    let rel: Vec<PathBuf> = match tool {
        Tool::Codex => {
            let triple = match (os, arch) {
                ("linux", "x64") => "x86_64-unknown-linux-musl",
                ("linux", "arm64") => "aarch64-unknown-linux-musl",
                ("darwin", "x64") => "x86_64-apple-darwin",
                ("darwin", "arm64") => "aarch64-apple-darwin",
                _ => return None,
            };
            vec![PathBuf::from(format!(
                "@openai/codex-{os}-{arch}/vendor/{triple}/bin/codex"
            ))]
        }
        Tool::OpenCode => {
            let main = PathBuf::from(format!("opencode-{os}-{arch}/bin/opencode"));
            let baseline = PathBuf::from(format!("opencode-{os}-{arch}-baseline/bin/opencode"));
            if arch == "x64" && !has_avx2() {
                vec![baseline, main]
            } else {
                vec![main, baseline]
            }
        }
        _ => return None,
    };
    let mut dirs = vec![package.join("node_modules")];
    dirs.extend(
        package
            .ancestors()
            .filter(|d| d.file_name().is_some_and(|n| n == "node_modules"))
            .map(Path::to_path_buf),
    );
    for dir in &dirs {
        for r in &rel {
            let candidate = dir.join(r);
            if is_executable(&candidate) && is_native(&candidate) {
                return Some(candidate);
            }
        }
    }
    if tool == Tool::Codex {
        if let Some(triple) = rel[0].iter().nth(3) {
            let vendored = package.join("vendor").join(triple).join("bin/codex");
            if is_executable(&vendored) && is_native(&vendored) {
                return Some(vendored);
            }
        }
    }
    None
}

/// npm's names for this platform (`process.platform`, `process.arch`).
fn npm_platform() -> Option<(&'static str, &'static str)> {
    let os = match std::env::consts::OS {
        "linux" => "linux",
        "macos" => "darwin",
        _ => return None,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        _ => return None,
    };
    Some((os, arch))
}

fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        true
    }
}

/// This binary (the `script` planner's replayer). When it was replaced on disk while running
/// (a rebuild or an upgrade), Linux names the old inode "PATH (deleted)": use the new file.
fn current_exe() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let text = exe.to_str()?;
    match text.strip_suffix(" (deleted)") {
        Some(path) if is_executable(Path::new(path)) => Some(PathBuf::from(path)),
        _ => Some(exe),
    }
}

/// Prepares one pass of `tool` (found at `program`): the process to start and its driver.
/// The prompt never passes through a shell and can never be read as a flag: it travels on
/// stdin (or over the planner's own channel), never in argv.
pub fn prepare(tool: Tool, program: &Path, req: &driver::PassRequest, config: &Config) -> driver::Prepared {
    let (args, env, opening, interactive) = match tool {
        Tool::Acp(name) => return acp::prepare(name, program, req, config),
        // Its own server per pass, driven over HTTP: the prompt is a call, not stdin.
        Tool::OpenCode => return opencode::prepare(program, req),
        // JSON-RPC on stdio (`codex app-server`): its own driver.
        Tool::Codex => return codex::prepare(program, req),
        Tool::Claude => {
            // Bidirectional mode: the prompt travels on stdin, never in argv.
            let args = claude::interactive_argv(req.model.as_deref(), req.resume.as_deref());
            let env = claude::env().into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            (
                args,
                env,
                Some(claude::interactive_opening(&req.prompt).join("\n") + "\n"),
                true,
            )
        }
        Tool::Script => {
            let script = req.model.clone().unwrap_or_else(|| "demo".into());
            // A script recorded in Claude's bidirectional mode talks on stdin like Claude.
            let interactive = script::is_interactive(&script);
            let opening = interactive.then(|| claude::interactive_opening(&req.prompt).join("\n") + "\n");
            (vec!["replay".to_owned(), script], Vec::new(), opening, interactive)
        }
    };
    driver::Prepared {
        recorded_args: args.clone(),
        spawn: crate::supervisor::SpawnSpec {
            program: program.to_owned(),
            args,
            cwd: req.root.clone(),
            env,
            stdin_pipe: opening.is_some(),
            sandbox: None,
        },
        driver: Box::new(lines::LinesDriver {
            parser: tool.parser(),
            opening,
            interactive,
        }),
    }
}

/// The `raw` event for a stdout line longer than the supervisor keeps: its head, and its size.
pub(crate) fn truncated_line_event(head: &str, len: usize) -> ParsedEvent {
    let max = 64 * 1024;
    let mut cut = head.len().min(max);
    while !head.is_char_boundary(cut) {
        cut -= 1;
    }
    let line = format!("{}… [truncated: the line was {len} bytes]", &head[..cut]);
    ParsedEvent::main(EventBody::Raw { line })
}

// Helpers shared by the adapters.

/// The frame of every adapter's `parse_line`: the line loses its terminator; a blank line
/// gives nothing; each JSON value on the line — a CLI may print several objects on one
/// line — goes to `on_value` in order, with its own text, and becomes a `raw` event after
/// whatever it emitted when `on_value` does not recognize it; what is left over once no
/// more JSON can be read (a line that is not JSON at all, or trailing garbage) is `raw`.
pub(crate) fn parse_json_line(
    line: &str,
    mut on_value: impl FnMut(&Value, &str, &mut Vec<ParsedEvent>) -> bool,
) -> Vec<ParsedEvent> {
    let line = line.trim_end_matches(['\r', '\n']);
    if line.trim().is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut values = serde_json::Deserializer::from_str(line).into_iter::<Value>();
    let mut start = 0;
    loop {
        match values.next() {
            Some(Ok(value)) => {
                let end = values.byte_offset();
                let text = line[start..end].trim();
                if !on_value(&value, text, &mut out) {
                    out.push(raw_event(text));
                }
                start = end;
            }
            None => break,
            Some(Err(_)) => {
                let rest = line[start..].trim();
                if !rest.is_empty() {
                    out.push(raw_event(rest));
                }
                break;
            }
        }
    }
    out
}

pub(crate) fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The typed fast path in front of [`parse_json_line`], for the common lines of a stream. The
/// line is deserialized into `T`, borrowed from the line, with no `Value` tree. `on_typed`
/// either handles it, returning `Some(recognized)` as `parse_json_line`'s `on_value` would,
/// or declines with `None` **before it changes any state or emits anything**. This function
/// returns `None` when `on_typed` declined or `T` did not deserialize, and the caller then
/// takes the `Value` path. A line therefore gives the same events on either path, provided
/// that `T` accepts only lines that `from_str::<Value>` accepts: `T` skips the fields it
/// does not name with [`Skip`], never with serde's laxer `IgnoredAny`, and keeps the last of
/// duplicate keys as `Value` does (see [`each_field`]).
pub(crate) fn parse_typed_line<'a, T: Deserialize<'a>>(
    line: &'a str,
    on_typed: impl FnOnce(T, &mut Vec<ParsedEvent>) -> Option<bool>,
) -> Option<Vec<ParsedEvent>> {
    let line = line.trim_end_matches(['\r', '\n']);
    if line.trim().is_empty() {
        return Some(Vec::new());
    }
    let typed = serde_json::from_str::<T>(line).ok()?;
    let mut out = Vec::new();
    let recognized = on_typed(typed, &mut out);
    debug_assert!(recognized.is_some() || out.is_empty(), "a declined line emitted events");
    if !recognized? {
        out.push(raw_event(line));
    }
    Some(out)
}

/// Any JSON value, skipped. It is checked exactly as `serde_json::from_str::<Value>` checks
/// it: through `deserialize_any`, so string escapes (lone surrogates), number range (`1e400`)
/// and nesting depth are validated, but nothing is allocated. Serde's `IgnoredAny` (what a
/// derived struct uses for unnamed fields) accepts all three.
pub(crate) struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_none<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Skip, D::Error> {
        Skip::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_key::<Skip>()?.is_some() {
            map.next_value::<Skip>()?;
        }
        Ok(Skip)
    }
}

/// A JSON string, borrowed from the line unless it has escapes. (Serde's own `Cow<str>`
/// always copies outside a derive's `#[serde(borrow)]`.)
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Str<'a>(pub Cow<'a, str>);

impl std::ops::Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

/// Walks a JSON object's fields for a hand-written typed struct: `field(key, map)` reads the
/// value of a key it names (`map.next_value()`) and returns true; every other value is read
/// as [`Skip`]. A struct assigns each value it reads, so the last of duplicate keys wins, as
/// in a `Value`.
pub(crate) fn each_field<'de, A: MapAccess<'de>>(
    mut map: A,
    mut field: impl FnMut(&str, &mut A) -> Result<bool, A::Error>,
) -> Result<(), A::Error> {
    while let Some(key) = map.next_key::<Str<'de>>()? {
        if !field(&key, &mut map)? {
            map.next_value::<Skip>()?;
        }
    }
    Ok(())
}

/// How much of a run's main-agent text a parser keeps: its last text blocks, up to this many
/// bytes (always at least the last block). The answers planwire looks for (the plan, an
/// outline, research findings) end the text; what was let go is in the store
/// ([`LineParser::text_dropped`]).
pub const TEXT_TAIL: usize = 1024 * 1024;

/// Text blocks, in order, as far back as [`TEXT_TAIL`] bytes: memory stays flat however
/// long the stream.
#[derive(Debug, Default)]
pub(crate) struct TextTail {
    blocks: std::collections::VecDeque<String>,
    bytes: usize,
    dropped: bool,
}

impl TextTail {
    /// Each block counts with the blank line that joins it to the next.
    pub fn push(&mut self, block: String) {
        self.bytes += block.len() + 2;
        self.blocks.push_back(block);
        while self.bytes > TEXT_TAIL && self.blocks.len() > 1 {
            let gone = self.blocks.pop_front().expect("more than one block");
            self.bytes -= gone.len() + 2;
            self.dropped = true;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    pub fn last(&self) -> Option<&String> {
        self.blocks.back()
    }

    /// The blocks kept, joined by `sep`.
    pub fn join(&self, sep: &str) -> String {
        let mut out = String::with_capacity(self.bytes + sep.len() * self.blocks.len());
        for (i, b) in self.blocks.iter().enumerate() {
            if i > 0 {
                out.push_str(sep);
            }
            out.push_str(b);
        }
        out
    }

    pub fn clear(&mut self) {
        self.dropped |= !self.blocks.is_empty();
        self.blocks.clear();
        self.bytes = 0;
    }

    /// Earlier blocks were let go.
    pub fn dropped(&self) -> bool {
        self.dropped
    }
}

/// Emits held main-agent events in order. Their text is final when `is_final`, and is then
/// also added to `final_text`.
pub(crate) fn emit_held(held: Vec<EventBody>, is_final: bool, final_text: &mut TextTail, out: &mut Vec<ParsedEvent>) {
    for mut body in held {
        if let EventBody::Text { text, is_final: flag } = &mut body {
            *flag = is_final;
            if is_final {
                final_text.push(text.clone());
            }
        }
        out.push(ParsedEvent::main(body));
    }
}

/// The subagents of a run, by key: each starts at most once (an ended key stays ended), and
/// those still open at EOF end as `interrupted` ([`Subagents::interrupt_open`]).
#[derive(Debug, Default)]
pub(crate) struct Subagents {
    /// `(key, label)` in start order.
    open: Vec<(String, String)>,
    ended: HashSet<String>,
}

impl Subagents {
    /// Emits `subagent start` unless `key` is open or has ended; true when it did.
    pub fn start(&mut self, key: &str, label: &str, out: &mut Vec<ParsedEvent>) -> bool {
        if self.is_open(key) || self.has_ended(key) {
            return false;
        }
        self.open.push((key.to_string(), label.to_string()));
        out.push(ParsedEvent::subagent_start(key, label));
        true
    }

    /// Emits `subagent end` with `status` when `key` is open.
    pub fn end(&mut self, key: &str, status: &str, out: &mut Vec<ParsedEvent>) {
        let Some(pos) = self.open.iter().position(|(k, _)| k == key) else {
            return;
        };
        let (key, label) = self.open.remove(pos);
        out.push(ParsedEvent::subagent_end(&key, &label, status));
        self.ended.insert(key);
    }

    /// At EOF: ends every open subagent as `interrupted`, in start order.
    pub fn interrupt_open(&mut self, out: &mut Vec<ParsedEvent>) {
        for (key, label) in std::mem::take(&mut self.open) {
            out.push(ParsedEvent::subagent_end(&key, &label, "interrupted"));
            self.ended.insert(key);
        }
    }

    pub fn is_open(&self, key: &str) -> bool {
        self.open.iter().any(|(k, _)| k == key)
    }

    pub fn has_ended(&self, key: &str) -> bool {
        self.ended.contains(key)
    }
}

/// A tool input's summary: the first non-empty string among `keys`, else the input itself (a
/// string, or compact JSON); at most [`claude::INPUT_SUMMARY_MAX`] characters.
pub(crate) fn summarize_fields(input: &Value, keys: &[&str]) -> String {
    let max = claude::INPUT_SUMMARY_MAX;
    for key in keys {
        if let Some(s) = str_of(input, key).filter(|s| !s.is_empty()) {
            return truncate_chars(s, max);
        }
    }
    match input {
        Value::Null => String::new(),
        Value::String(s) => truncate_chars(s, max),
        other => truncate_chars(&other.to_string(), max),
    }
}

/// A value that can follow a flag: not empty, not starting with `-` (it would be read as a
/// flag), no control characters.
pub(crate) fn flag_value_ok(value: &str) -> bool {
    !value.is_empty() && !value.starts_with('-') && !value.chars().any(char::is_control)
}

/// At most `max` characters, with an ellipsis when cut.
pub(crate) fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((cut, _)) => format!("{}…", &s[..cut]),
    }
}

/// A `raw` event for a line, cut at [`claude::RAW_LINE_MAX`] bytes.
pub(crate) fn raw_event(line: &str) -> ParsedEvent {
    let max = claude::RAW_LINE_MAX;
    let line = if line.len() <= max {
        line.to_string()
    } else {
        let mut cut = max;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}…", &line[..cut])
    };
    ParsedEvent::main(EventBody::Raw { line })
}

/// Text without ANSI escape sequences (CSI `ESC [ … final` and two-byte `ESC x`).
pub(crate) fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        // `ESC [ … final byte`; any other escape drops the one character after ESC.
        if chars.next() == Some('[') {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
    }
    out
}

/// The first HTTP error status in an error text: the three digits after `status`
/// (`unexpected status 401 Unauthorized`, `last status: 429`) or `API Error:`.
pub(crate) fn status_in_text(text: &str) -> Option<i64> {
    let lower = text.to_ascii_lowercase();
    for marker in ["status", "api error"] {
        let mut from = 0;
        while let Some(pos) = lower[from..].find(marker) {
            let rest = &lower[from + pos + marker.len()..];
            let rest = rest.trim_start_matches([':', ' ']);
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if digits.len() == 3 && (digits.starts_with('4') || digits.starts_with('5')) {
                return digits.parse().ok();
            }
            from += pos + marker.len();
        }
    }
    None
}

/// Classifies a model API error from its HTTP status, the provider's error code
/// (`invalid_api_key`, `rate_limit_exceeded`, `context_length_exceeded`, …) and its text.
pub(crate) fn classify_api_error(status: Option<i64>, code: Option<&str>, text: &str) -> ErrorKind {
    match status {
        Some(401 | 403) => return ErrorKind::Auth,
        Some(413) => return ErrorKind::ContextOverflow,
        Some(429) => return ErrorKind::RateLimit,
        Some(503 | 529) => return ErrorKind::Overloaded,
        _ => {}
    }
    let code = code.unwrap_or("").to_ascii_lowercase();
    let t = format!("{code} {}", text.to_ascii_lowercase());
    let has = |needles: &[&str]| needles.iter().any(|n| t.contains(n));
    if has(&[
        "context_length_exceeded",
        "context window",
        "maximum context length",
        "context length",
        "prompt is too long",
        "prompt_too_long",
        "too many tokens",
    ]) {
        ErrorKind::ContextOverflow
    } else if has(&[
        "invalid_api_key",
        "invalid api key",
        "incorrect api key",
        "api key",
        "unauthorized",
        "authentication",
        "missing environment variable",
        "not logged in",
        "login",
    ]) {
        ErrorKind::Auth
    } else if has(&["rate limit", "rate_limit", "too many requests", "quota", "usage limit"]) {
        ErrorKind::RateLimit
    } else if has(&["overloaded", "high demand", "server is busy", "capacity"]) {
        ErrorKind::Overloaded
    } else if has(&[
        "connection failed",
        "connection refused",
        "econnrefused",
        "econnreset",
        "enotfound",
        "etimedout",
        "error sending request",
        "stream disconnected",
        "unable to connect",
        "fetch failed",
        "socket hang up",
        "network",
        "dns error",
        "timed out",
    ]) {
        ErrorKind::Network
    } else {
        ErrorKind::Unknown
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Compact views of event sequences for the adapters' tests.

    use planwire_protocol::{ErrorKind, EventBody, SubagentPhase, ToolStatus};

    use super::{LineParser, ParsedEvent};

    /// `fixtures!("claude": "a_plain", …)` defines `fixture(name)`, the recorded stdout
    /// `tests/fixtures/claude/a_plain.stdout.jsonl`, and `ALL`, every name listed.
    macro_rules! fixtures {
        ($dir:literal: $($name:literal),* $(,)?) => {
            #[allow(dead_code)]
            const ALL: &[&str] = &[$($name),*];

            fn fixture(name: &str) -> &'static str {
                match name {
                    $($name => include_str!(concat!(
                        "../../../tests/fixtures/", $dir, "/", $name, ".stdout.jsonl"
                    )),)*
                    other => panic!("no fixture {other}"),
                }
            }
        };
    }
    pub(crate) use fixtures;

    pub fn feed(p: &mut dyn LineParser, text: &str) -> Vec<ParsedEvent> {
        let mut events = Vec::new();
        for line in text.lines() {
            events.extend(p.parse_line(line));
        }
        events.extend(p.finish());
        events
    }

    /// Kind, plus `!` for final text, `:start`/`:end`, `:Kind` for errors, `=status` for
    /// tool results, `@agent`.
    pub fn shape(events: &[ParsedEvent]) -> Vec<String> {
        shape_of(events, true)
    }

    /// [`shape`] without the `=status` of tool results.
    pub fn shape_without_status(events: &[ParsedEvent]) -> Vec<String> {
        shape_of(events, false)
    }

    fn shape_of(events: &[ParsedEvent], tool_status: bool) -> Vec<String> {
        events
            .iter()
            .map(|e| {
                let mut s = e.body.kind().to_string();
                match &e.body {
                    EventBody::Text { is_final: true, .. } => s.push('!'),
                    EventBody::Subagent { phase, .. } => s.push_str(match phase {
                        SubagentPhase::Start => ":start",
                        SubagentPhase::End => ":end",
                    }),
                    EventBody::Error { error_kind, .. } => s.push_str(&format!(":{error_kind:?}")),
                    EventBody::ToolResult { status, .. } if tool_status => s.push_str(match status {
                        ToolStatus::Completed => "=ok",
                        ToolStatus::Error => "=err",
                        ToolStatus::Running => "=running",
                    }),
                    _ => {}
                }
                if let Some(agent) = &e.agent {
                    s.push('@');
                    s.push_str(agent);
                }
                s
            })
            .collect()
    }

    pub fn texts(events: &[ParsedEvent]) -> Vec<(String, bool)> {
        events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::Text { text, is_final } => Some((text.clone(), *is_final)),
                _ => None,
            })
            .collect()
    }

    /// Every usage event: (input, output, cache read, cache write, cost).
    pub fn usages(events: &[ParsedEvent]) -> Vec<(u64, u64, u64, u64, f64)> {
        events
            .iter()
            .filter_map(|e| match e.body {
                EventBody::Usage {
                    input_tokens,
                    output_tokens,
                    cache_read_tokens,
                    cache_write_tokens,
                    cost_usd,
                } => Some((
                    input_tokens,
                    output_tokens,
                    cache_read_tokens,
                    cache_write_tokens,
                    cost_usd,
                )),
                _ => None,
            })
            .collect()
    }

    pub fn errors(events: &[ParsedEvent]) -> Vec<(ErrorKind, String)> {
        events
            .iter()
            .filter_map(|e| match &e.body {
                EventBody::Error { error_kind, message } => Some((*error_kind, message.clone())),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn text_tails_keep_the_last_blocks_up_to_the_bound() {
        let mut t = TextTail::default();
        t.push("first".into());
        t.push("second".into());
        assert_eq!(t.join("\n\n"), "first\n\nsecond");
        assert!(!t.dropped());
        for i in 0..3000 {
            t.push(format!("{i:04} {}", "x".repeat(995)));
        }
        assert!(t.dropped());
        let kept = t.join("\n\n");
        assert!(
            kept.len() <= TEXT_TAIL && kept.len() > TEXT_TAIL - 2000,
            "{}",
            kept.len()
        );
        assert!(kept.ends_with(&"x".repeat(995)));
        assert!(t.last().unwrap().starts_with("2999 "));
        // A block larger than the bound is kept whole: it is the last one.
        t.push("y".repeat(TEXT_TAIL + 1));
        assert_eq!(t.join("").len(), TEXT_TAIL + 1);
    }

    #[test]
    fn claudes_parser_keeps_a_bounded_tail_of_a_long_stream() {
        // The other adapters' mappers keep the same `TextTail` (their own tests, and the fuzz
        // targets, check the bound).
        let block = "z".repeat(1000);
        let line = format!(
            r#"{{"type":"assistant","message":{{"id":"m@","content":[{{"type":"text","text":"{block}"}}]}},"parent_tool_use_id":null}}"#
        );
        let mut p = Tool::Claude.parser();
        for i in 0..3000 {
            p.parse_line(&line.replace('@', &i.to_string()));
        }
        p.finish();
        assert!(p.all_text().len() <= TEXT_TAIL, "{}", p.all_text().len());
        assert!(p.text_dropped());
    }

    use super::*;

    #[test]
    fn tool_names_round_trip() {
        for tool in Tool::ALL {
            assert_eq!(Tool::parse(tool.name()), Some(tool));
        }
        assert!(Tool::OpenCode.install_hint().contains("opencode-ai"));
        assert!(Tool::OpenCode.install_hint().contains("rg"));
        assert!(Tool::Codex.install_hint().contains("@openai/codex"));
    }

    #[test]
    fn the_prompt_never_reaches_argv() {
        let req = driver::PassRequest {
            prompt: "Plan the ticket below. --dangerously-skip-permissions".into(),
            model: Some("p/m".into()),
            ..Default::default()
        };
        for tool in [Tool::Claude, Tool::OpenCode, Tool::Codex] {
            let config = Config::from_options(&Default::default());
            let p = prepare(tool, Path::new("/bin/true"), &req, &config);
            // OpenCode's prompt is an HTTP call to its server.
            assert_eq!(
                p.spawn.stdin_pipe,
                tool != Tool::OpenCode,
                "{tool:?}: the prompt goes on stdin"
            );
            assert!(!p.spawn.args.iter().any(|a| a.contains("Plan the ticket")), "{tool:?}");
            assert_eq!(p.spawn.args, p.recorded_args, "{tool:?}");
        }
    }

    #[test]
    fn several_json_objects_on_one_line_are_parsed_in_order_and_only_the_rest_is_raw() {
        let mut p = claude::ClaudeParser::new();
        let line = concat!(
            r#"{"type":"system","subtype":"init","session_id":"s1","tools":[]}"#,
            r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"one"}]}} "#,
            r#"{"type":"result","subtype":"success","is_error":false,"result":"one","usage":{}}"#,
            r#" trailing {"#
        );
        let events = p.parse_line(line);
        let kinds: Vec<&str> = events.iter().map(|e| e.body.kind()).collect();
        assert_eq!(kinds, ["session", "text", "usage", "raw"], "{events:?}");
        assert!(matches!(&events[1].body, EventBody::Text { text, is_final: true } if text == "one"));
        assert!(matches!(&events[3].body, EventBody::Raw { line } if line == "trailing {"));
        assert_eq!(p.final_text(), "one");
    }

    #[test]
    fn ansi_is_stripped() {
        assert_eq!(
            strip_ansi("\u{1b}[93m\u{1b}[1m! \u{1b}[0mpermission requested"),
            "! permission requested"
        );
        assert_eq!(strip_ansi("plain"), "plain");
        assert_eq!(strip_ansi("cut \u{1b}["), "cut ");
    }

    #[test]
    fn statuses_in_text() {
        assert_eq!(status_in_text("unexpected status 401 Unauthorized: bad key"), Some(401));
        assert_eq!(
            status_in_text("exceeded retry limit, last status: 429 Too Many Requests"),
            Some(429)
        );
        assert_eq!(status_in_text("API Error: 529 Overloaded"), Some(529));
        assert_eq!(status_in_text("status: 200 fine"), None);
        assert_eq!(status_in_text("Connection failed"), None);
    }

    #[test]
    fn api_error_classes() {
        use ErrorKind::*;
        assert_eq!(classify_api_error(Some(401), None, ""), Auth);
        assert_eq!(classify_api_error(Some(429), None, ""), RateLimit);
        assert_eq!(classify_api_error(Some(529), None, ""), Overloaded);
        assert_eq!(
            classify_api_error(Some(400), Some("context_length_exceeded"), "x"),
            ContextOverflow
        );
        assert_eq!(
            classify_api_error(None, None, "Connection failed: error sending request"),
            Network
        );
        assert_eq!(classify_api_error(Some(500), None, "The server had an error"), Unknown);
        assert_eq!(
            classify_api_error(None, None, "We’re currently experiencing high demand"),
            Overloaded
        );
    }

    fn write_exe(path: &Path, bytes: &[u8]) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn native_binary_is_found_next_to_the_npm_launcher() {
        let Some((os, arch)) = npm_platform() else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let nm = dir.path().join("node_modules");
        let elf = b"\x7fELF-not-really";

        // Codex: .bin/codex -> ../@openai/codex/bin/codex.js (a node script).
        let wrapper = nm.join("@openai/codex/bin/codex.js");
        write_exe(&wrapper, b"#!/usr/bin/env node\n");
        std::fs::create_dir_all(nm.join(".bin")).unwrap();
        std::os::unix::fs::symlink("../@openai/codex/bin/codex.js", nm.join(".bin/codex")).unwrap();
        assert!(!is_native(&nm.join(".bin/codex")));
        assert_eq!(native_binary(Tool::Codex, &nm.join(".bin/codex")), None);
        let triple = match (os, arch) {
            ("linux", "x64") => "x86_64-unknown-linux-musl",
            ("linux", "arm64") => "aarch64-unknown-linux-musl",
            ("darwin", "x64") => "x86_64-apple-darwin",
            _ => "aarch64-apple-darwin",
        };
        let native = nm.join(format!("@openai/codex-{os}-{arch}/vendor/{triple}/bin/codex"));
        write_exe(&native, elf);
        let found = native_binary(Tool::Codex, &nm.join(".bin/codex")).unwrap();
        assert_eq!(found, std::fs::canonicalize(&native).unwrap());
        assert!(is_native(&found));

        // OpenCode: the placeholder left by a skipped postinstall.
        let placeholder = nm.join("opencode-ai/bin/opencode.exe");
        write_exe(
            &placeholder,
            b"echo \"Error: opencode-ai's postinstall script was not run.\" >&2\nexit 1\n",
        );
        let native = nm.join(format!("opencode-{os}-{arch}/bin/opencode"));
        write_exe(&native, elf);
        let baseline = nm.join(format!("opencode-{os}-{arch}-baseline/bin/opencode"));
        write_exe(&baseline, elf);
        let found = native_binary(Tool::OpenCode, &placeholder).unwrap();
        let expected = if arch == "x64" && !has_avx2() {
            &baseline
        } else {
            &native
        };
        assert_eq!(found, std::fs::canonicalize(expected).unwrap());
        assert_eq!(native_binary(Tool::Claude, &placeholder), None);
    }
}
