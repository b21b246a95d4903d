//! The server's module map, checked: which top-level module of `server/src` names which other
//! one, and whether that map points down.
//!
//! The map is read from the sources: every `crate::<module>` path (`use crate::x`, `use
//! crate::{x, y::z}`, `crate::x::f()`), and `super::` paths that climb to the crate root, in
//! `server/src/**/*.rs`, at the granularity of the top-level modules (`src/x.rs` or `src/x/`).
//! Before it is read, each file loses its comments (doc comments too), its string and char
//! literals, and its `#[cfg(test)]` items (a `mod tests { … }` block, or a `mod tests;`
//! declaration and with it the file it names): a test may build on anything, and what is said
//! about a module is not a dependency on it. `lib.rs` and `main.rs` only declare and start the
//! modules, so they are not nodes.
//!
//! (An inline non-test `mod x { … }` block is not followed: a `super::` inside one would be
//! counted from its file. The server has none that climbs out.)
//!
//! Two rules, each with its tables as data below, to be extended by later steps:
//! - [`LAYERS`]: a module names only modules of lower layers, but for the [`KNOWN_UPWARD`]
//!   arrows. A module left out of the table is not checked yet: to check one, add it to its
//!   layer (or a new layer, in order); the failure lists each offending edge.
//! - no cycles but the [`KNOWN_CYCLES`]: a new cycle fails with one loop through it and its
//!   edges.
//!
//! Both lists of known debt must match exactly: one that is cut must be taken out, so they
//! only shrink.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Layers from the lowest up. A module may name modules of lower layers only: never one of its
/// own layer or above. The OS sandbox itself is the `planwire-sandbox` crate, below them all
/// (the compiler keeps that direction).
const LAYERS: &[(&str, &[&str])] = &[
    ("helpers", &["util"]),
    ("processes and the work tree", &["supervisor", "worktree"]),
    ("the server's side of the sandbox", &["sandbox"]),
    ("planner adapters", &["planners"]),
    ("runs", &["runner"]),
    ("request handlers", &["handlers"]),
];

/// Arrows up the [`LAYERS`] not cut yet, as `(from, to)`. Empty it as they are cut; an
/// arrow that is gone must be taken out.
const KNOWN_UPWARD: &[(&str, &str)] = &[
    // runner/breakdown.rs re-checks the root with `handlers::create_ticket::check_root` (the
    // house's step 6: the handler passes a checked root).
    ("runner", "handlers"),
];

/// Cycles of top-level modules not cut yet (later steps of the house's plan), each as the set
/// of its modules. Empty it as they are cut; a cycle that is gone or has changed must be taken
/// out or listed as it is now.
const KNOWN_CYCLES: &[&[&str]] = &[
    // acp/ borrows cli/client.rs (step 5: the in-process client moves to client.rs), and mcp/
    // borrows acp/backend.rs, the in-process server both fronts drive (with the client, it
    // leaves the fronts), and cli/output.rs's error line.
    &["acp", "cli", "mcp"],
    // store/tickets.rs calls `planners::plan::plan_markdown` (step 3: planning/); config.rs
    // asks the store for the default database path.
    &["config", "planners", "store"],
    // runner/breakdown.rs calls `handlers::…::check_root` (step 6), and session.rs holds the
    // runner's `OpenBlocks` (step 6: it moves into session.rs).
    &["handlers", "progress", "runner", "session"],
];

type Graph = BTreeMap<String, BTreeSet<String>>;

#[test]
fn lower_layers_never_name_higher_ones() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let found: BTreeSet<(String, String)> = upward_edges(&graph, LAYERS).into_iter().collect();
    let known: BTreeSet<(String, String)> = KNOWN_UPWARD
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let show = |edges: Vec<&(String, String)>| {
        let lines: Vec<String> = edges.iter().map(|e| describe_upward(e, LAYERS)).collect();
        lines.join("\n")
    };
    let new: Vec<_> = found.difference(&known).collect();
    let gone: Vec<_> = known.difference(&found).collect();
    assert!(
        new.is_empty(),
        "these modules name a module of their own layer or above (see LAYERS):\n{}",
        show(new)
    );
    assert!(
        gone.is_empty(),
        "KNOWN_UPWARD lists arrows that are gone (take them out):\n{}",
        show(gone)
    );
}

#[test]
fn no_cycles_but_the_known_ones() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let found = cycles(&graph);
    let known: BTreeSet<BTreeSet<String>> = KNOWN_CYCLES
        .iter()
        .map(|c| c.iter().map(|m| m.to_string()).collect())
        .collect();
    let new: Vec<String> = found.difference(&known).map(|c| describe_cycle(&graph, c)).collect();
    let gone: Vec<String> = known.difference(&found).map(|c| format!("{c:?}")).collect();
    assert!(new.is_empty(), "import cycles not in KNOWN_CYCLES:\n{}", new.join("\n"));
    assert!(
        gone.is_empty(),
        "KNOWN_CYCLES lists cycles that are gone or have changed (take them out, or list the \
         cycle as it is now):\n{}",
        gone.join("\n")
    );
}

#[test]
fn the_scanner_sees_paths_and_skips_comments_strings_and_tests() {
    let source = r##"
        //! Mentions crate::handlers in a doc comment.
        use crate::{supervisor::{self, SpawnSpec}, util};
        use crate::store::runs;
        /* crate::runner in a /* nested */ block comment */
        fn f() -> &'static str {
            let _c = '"'; let _d = b'\''; let _e = '\\';
            crate::config::load();
            let _s = "crate::acp in a string \" crate::cli";
            let _r = r#"crate::session in a raw "string""#;
            super::progress::tick();
            planwire::server::run(); // another crate's path
            "ok"
        }
        pub(crate) fn g() {}
        #[cfg(test)]
        mod tests {
            use crate::transport;
            fn h() { if true { crate::context::x(); } }
        }
        #[cfg(test)]
        mod more_tests;
        fn after() { crate::planners::Tool::ALL; }
    "##;
    let (names, test_mods) = names_in(source, &["sandbox"]);
    let want: BTreeSet<String> = ["supervisor", "util", "store", "config", "progress", "planners"]
        .map(String::from)
        .into();
    assert_eq!(names, want);
    assert_eq!(test_mods, ["more_tests"]);
    // From a file deeper down, `super::` stays in its own top-level module until it has
    // climbed to the crate root.
    let (names, _) = names_in("use super::x; use super::super::util;", &["a", "b"]);
    assert_eq!(names, ["util".to_string()].into());
}

#[test]
fn the_rules_report_what_breaks_them() {
    let graph: Graph = [
        ("supervisor", vec!["util", "planners"]),
        ("planners", vec!["supervisor", "util"]),
        ("util", vec![]),
    ]
    .into_iter()
    .map(|(m, to)| (m.to_string(), to.into_iter().map(String::from).collect()))
    .collect();
    let up = upward_edges(&graph, LAYERS);
    assert_eq!(up, [("supervisor".to_string(), "planners".to_string())]);
    assert_eq!(
        describe_upward(&up[0], LAYERS),
        "supervisor -> planners (layer \"processes and the work tree\" names layer \"planner adapters\")"
    );
    let found = cycles(&graph);
    assert_eq!(found.len(), 1);
    let cycle = found.iter().next().unwrap();
    assert_eq!(describe_cycle(&graph, cycle), "planners -> supervisor -> planners");
}

/// Edges from a module of a layer to a module of the same layer or a higher one.
fn upward_edges(graph: &Graph, layers: &[(&str, &[&str])]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (from, tos) in graph {
        let Some(lf) = layer_of(from, layers) else { continue };
        for to in tos {
            if layer_of(to, layers).is_some_and(|lt| lt >= lf) {
                out.push((from.clone(), to.clone()));
            }
        }
    }
    out
}

fn layer_of(module: &str, layers: &[(&str, &[&str])]) -> Option<usize> {
    layers.iter().position(|(_, ms)| ms.contains(&module))
}

fn describe_upward((from, to): &(String, String), layers: &[(&str, &[&str])]) -> String {
    let name = |m: &str| layer_of(m, layers).map_or("?", |l| layers[l].0);
    format!("{from} -> {to} (layer {:?} names layer {:?})", name(from), name(to))
}

/// The graph's cycles: its strongly connected components of more than one module.
fn cycles(graph: &Graph) -> BTreeSet<BTreeSet<String>> {
    let reach = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start.to_string()];
        while let Some(m) = todo.pop() {
            for to in graph.get(&m).into_iter().flatten() {
                if seen.insert(to.clone()) {
                    todo.push(to.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|m| (m, reach(m))).collect();
    let mut out = BTreeSet::new();
    for (m, from_m) in &reached {
        let component: BTreeSet<String> = from_m
            .iter()
            .filter(|o| reached.get(o).is_some_and(|r| r.contains(*m)))
            .cloned()
            .collect();
        if component.len() > 1 {
            out.insert(component);
        }
    }
    out
}

/// One loop through the cycle `c` (the shortest from its first module back to it), and the
/// cycle's edges, for a failure message.
fn describe_cycle(graph: &Graph, c: &BTreeSet<String>) -> String {
    let start = c.iter().next().unwrap();
    let mut paths: Vec<Vec<&String>> = vec![vec![start]];
    let mut seen = BTreeSet::new();
    let mut lap = None;
    'search: while !paths.is_empty() {
        let mut next = Vec::new();
        for path in paths {
            for to in graph[*path.last().unwrap()].iter().filter(|t| c.contains(*t)) {
                let mut longer = path.clone();
                longer.push(to);
                if to == start {
                    lap = Some(longer);
                    break 'search;
                }
                if seen.insert(to) {
                    next.push(longer);
                }
            }
        }
        paths = next;
    }
    let lap: Vec<&str> = lap.unwrap_or_default().into_iter().map(String::as_str).collect();
    let edges: Vec<String> = c
        .iter()
        .flat_map(|m| {
            graph[m]
                .iter()
                .filter(|t| c.contains(*t))
                .map(move |t| format!("{m} -> {t}"))
        })
        .collect();
    if c.len() == 2 {
        lap.join(" -> ")
    } else {
        format!("{}\n  (its edges: {})", lap.join(" -> "), edges.join(", "))
    }
}

/// Which top-level module names which, over the files under `src`.
fn module_graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|f| module_path(src, f).first().cloned())
        .collect();
    assert!(modules.len() > 5, "no modules found under {}", src.display());
    let mut test_files = BTreeSet::new();
    let mut graph = Graph::new();
    // Parents before children, so a `mod tests;` is seen before its file.
    files.sort_by_key(|f| f.components().count());
    for file in &files {
        let path = module_path(src, file);
        let Some(top) = path.first() else { continue };
        if test_files.contains(file) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let (names, test_mods) = names_in(&text, &path);
        let dir = if file.file_stem().is_some_and(|s| s == "mod") {
            file.parent().unwrap().to_owned()
        } else {
            file.with_extension("")
        };
        for m in test_mods {
            test_files.insert(dir.join(format!("{m}.rs")));
            test_files.insert(dir.join(&m).join("mod.rs"));
        }
        let edges = graph.entry(top.clone()).or_default();
        edges.extend(names.into_iter().filter(|n| n != top && modules.contains(n)));
    }
    graph
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src` (`src/a/b.rs` and `src/a/b/mod.rs`: `[a, b]`);
/// empty for `lib.rs` and `main.rs`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut path: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    if path.last().is_some_and(|l| l == "mod") {
        path.pop();
    }
    if path.len() == 1 && (path[0] == "lib" || path[0] == "main") {
        path.clear();
    }
    path
}

/// The top-level modules the code in `source` names (the file's module path is `path`), and
/// the names of its `#[cfg(test)] mod x;` declarations.
fn names_in(source: &str, path: &[impl AsRef<str>]) -> (BTreeSet<String>, Vec<String>) {
    let (code, test_mods) = without_tests(&code_only(source));
    let words = tokens(&code);
    let mut names = BTreeSet::new();
    for (i, w) in words.iter().enumerate() {
        let prev_is_dollar = i > 0 && words[i - 1] == "$";
        if w == "crate" && !prev_is_dollar && words.get(i + 1).is_some_and(|t| t == "::") {
            names.extend(heads(&words[i + 2..]));
        } else if w == "super" && (i == 0 || words[i - 1] != "::") {
            // `super::super::…::x`: climbs one module per `super`.
            let mut ups = 0;
            let mut j = i;
            while words.get(j).is_some_and(|t| t == "super") && words.get(j + 1).is_some_and(|t| t == "::") {
                ups += 1;
                j += 2;
            }
            // As many as the file's depth reach the crate root.
            if ups == path.len() {
                names.extend(heads(&words[j..]));
            }
        }
    }
    (names, test_mods)
}

/// The first segments of what follows `crate::`: one name, or each name of a `{…}` group.
fn heads(rest: &[String]) -> Vec<String> {
    let Some(first) = rest.first() else { return Vec::new() };
    if first != "{" {
        return vec![first.clone()];
    }
    let mut out = Vec::new();
    let mut depth = 0;
    let mut expect_name = true;
    for t in rest {
        match t.as_str() {
            "{" => {
                depth += 1;
                if depth > 1 {
                    expect_name = false;
                }
            }
            "}" => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            "," if depth == 1 => expect_name = true,
            name if depth == 1 && expect_name => {
                out.push(name.to_string());
                expect_name = false;
            }
            _ => {}
        }
    }
    out
}

/// Identifiers, `::` and single punctuation characters.
fn tokens(code: &str) -> Vec<String> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
            continue;
        }
        if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
            continue;
        }
        if !c.is_whitespace() {
            out.push(c.to_string());
        }
        i += 1;
    }
    out
}

/// `source` with comments and string and char literals blanked (byte strings and raw
/// strings too); lifetimes are kept.
fn code_only(source: &str) -> String {
    let s: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if let Some(hashes) = raw_string_at(&s, i) {
            // r"…", r#"…"#, br"…": ends at a quote followed by as many hashes.
            i += s[i..].iter().position(|&ch| ch == '"').unwrap() + 1;
            let close: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            while i < s.len() && !s[i..].starts_with(&close) {
                i += 1;
            }
            i += close.len();
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < s.len() && s[i] != '"' {
                i += if s[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && (next == Some('\\') || s.get(i + 2) == Some(&'\'')) {
            // A char literal ('x', '\n', '\''), not a lifetime ('a).
            i += if next == Some('\\') { 3 } else { 2 };
            while i < s.len() && s[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// At `i`, the start of a raw string (`r"`, `r#"`, `br#"` …, not inside an identifier): how
/// many hashes it has.
fn raw_string_at(s: &[char], i: usize) -> Option<usize> {
    if i > 0 && (s[i - 1].is_alphanumeric() || s[i - 1] == '_') {
        return None;
    }
    let mut j = i;
    if s.get(j) == Some(&'b') {
        j += 1;
    }
    if s.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = s[j..].iter().take_while(|&&c| c == '#').count();
    (s.get(j + hashes) == Some(&'"')).then_some(hashes)
}

/// `code` (comments and literals already blanked) without its `#[cfg(test)]` items, and the
/// names of the `#[cfg(test)] mod x;` declarations among them.
fn without_tests(code: &str) -> (String, Vec<String>) {
    const ATTR: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut test_mods = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(ATTR) {
        out.push_str(&rest[..at]);
        let item = &rest[at + ATTR.len()..];
        // The item ends at its first `;` outside braces, or with its outermost `{…}`.
        let mut depth = 0usize;
        let mut end = item.len();
        for (k, ch) in item.char_indices() {
            match ch {
                '{' => depth += 1,
                // An attribute inside a block (a field, an arm) ends at that block's end.
                '}' if depth == 0 => {
                    end = k;
                    break;
                }
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    let words = tokens(&item[..k]);
                    if let [.., m, name] = words.as_slice() {
                        if m == "mod" {
                            test_mods.push(name.clone());
                        }
                    }
                    end = k + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    (out, test_mods)
}
