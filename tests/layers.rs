//! The import graph of `crate/src`: no circle between files, and no import from a lower
//! layer into a higher one.
//!
//! Every `use` of `crate::`, `super::` or `self::` paths and every inline `crate::…` /
//! `super::…` path outside comments, strings and `#[cfg(test)]` items is an edge from the
//! file's module to the longest module prefix of the path (`crate::Error` and
//! `crate::Result`, re-exported at the root, are `error`'s). A module's re-exports of its own
//! children (`pub use child::…`) are structure, not edges.
//!
//! The layers, lowest first (ARCHITECTURE.md): `error`; `rng`; `tensor`; `ir`; `trace`,
//! `autograd` and `kernels` (each reads graphs, none another); `compile` (the planner: ir and
//! autograd only, never kernels or exec) and `exec`; `poptorch`; `gnn` and `export` (a model out as Python); `models` (the demo
//! models, RevGNN's through `gnn::preview`); `api` (the wasm-bindgen edge). A module may
//! import from its own folder and from lower layers only.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module's layer: an import must go to a strictly lower one.
const LAYERS: &[(&str, u32)] = &[
    ("error", 0),
    ("rng", 1),
    ("progress", 1),
    ("wasm_heap", 0),
    ("tensor", 2),
    ("ir", 3),
    ("trace", 4),
    ("autograd", 4),
    ("kernels", 4),
    ("compile", 5),
    ("exec", 5),
    ("poptorch", 6),
    ("gnn", 7),
    ("export", 7),
    ("models", 8),
    ("api", 9),
];

type Module = Vec<String>;

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crate/src")
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `crate/src/a/b.rs` → `[a, b]`; `a/mod.rs` → `[a]`; `lib.rs` → `[]`.
fn module_of(root: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Module = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The source without comments, string and char literals (blanked, so `//` in a URL or
/// `crate::` in a message is not read as code).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
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
        } else if c == b'r' && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#')) && !ident_before(b, i) {
            // A raw string r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            i = j + close.len();
            out.push_str("\"\"");
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' {
            // A char literal ('x', '\n', '"'), or a lifetime ('a), which stays.
            if b.get(i + 1) == Some(&b'\\') {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&b'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            // Multi-byte characters are copied whole.
            let ch = src[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn ident_before(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// The code without `#[cfg(test)]` items.
fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let (brace, semi) = (item.find('{'), item.find(';'));
        let end = match (brace, semi) {
            (Some(o), s) if s.is_none_or(|s| o < s) => {
                let mut depth = 0;
                let mut end = item.len();
                for (k, ch) in item[o..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = o + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (_, Some(s)) => s + 1,
            _ => item.len(),
        };
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// A use tree (`a::{b, c::{d, e as f}}`, whitespace removed) expanded to its paths.
fn expand(prefix: &[String], tree: &str) -> Vec<Vec<String>> {
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open].split("::").filter(|s| !s.is_empty()).map(String::from).collect();
        let body = &tree[open + 1..tree.rfind('}').unwrap()];
        let mut items = vec![];
        let (mut depth, mut start) = (0, 0);
        for (k, ch) in body.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&body[start..k]);
                    start = k + 1;
                }
                _ => {}
            }
        }
        items.push(&body[start..]);
        let p: Vec<String> = prefix.iter().cloned().chain(head).collect();
        items.into_iter().filter(|s| !s.is_empty()).flat_map(|it| expand(&p, it)).collect()
    } else {
        let tree = tree.split(" as ").next().unwrap();
        vec![prefix.iter().cloned().chain(tree.split("::").filter(|s| !s.is_empty()).map(String::from)).collect()]
    }
}

/// The `crate`/`super`/`self` paths a module's code names.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = vec![];
    let b = code.as_bytes();
    // use declarations
    let mut from = 0;
    while let Some(k) = code[from..].find("use ") {
        let at = from + k;
        from = at + 4;
        if ident_before(b, at) {
            continue;
        }
        let end = code[at..].find(';').map_or(code.len(), |e| at + e);
        let tree: String = code[at + 4..end].split_whitespace().collect::<Vec<_>>().join(" ");
        let tree =
            tree.replace(" ::", "::").replace(":: ", "::").replace(", ", ",").replace("{ ", "{").replace(" }", "}");
        if ["crate::", "super::", "self::"].iter().any(|p| tree.starts_with(p)) {
            out.extend(expand(&[], &tree));
        }
    }
    // inline paths
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(k) = code[from..].find(start) {
            let at = from + k;
            from = at + start.len();
            if ident_before(b, at) || (at > 0 && b[at - 1] == b':') {
                continue;
            }
            let mut end = at;
            while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_' || b[end] == b':') {
                end += 1;
            }
            let path: Vec<String> = code[at..end].split("::").filter(|s| !s.is_empty()).map(String::from).collect();
            // `super::{…}` of a use tree is read above.
            if path.len() > 1 {
                out.push(path);
            }
        }
    }
    out
}

/// The module a path names: the longest module prefix (`super`/`self` taken from `m`).
fn resolve(m: &Module, path: &[String], modules: &BTreeSet<Module>) -> Option<Module> {
    let mut abs: Module = vec![];
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => rest = &path[1..],
        Some("super" | "self") => {
            abs = m.clone();
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "super" => {
                        abs.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    abs.extend(rest.iter().cloned());
    for k in (1..=abs.len()).rev() {
        if modules.contains(&abs[..k]) {
            return Some(abs[..k].to_vec());
        }
    }
    // Items re-exported at the root.
    matches!(abs.first().map(String::as_str), Some("Error" | "ErrorKind" | "Result")).then(|| vec!["error".into()])
}

fn import_graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let root = src_dir();
    let mut files = vec![];
    rs_files(&root, &mut files);
    let modules: BTreeSet<Module> = files.iter().map(|f| module_of(&root, f)).collect();
    let mut graph = BTreeMap::new();
    for f in &files {
        let m = module_of(&root, f);
        let code = without_tests(&code_only(&std::fs::read_to_string(f).unwrap()));
        let deps: BTreeSet<Module> =
            paths(&code).iter().filter_map(|p| resolve(&m, p, &modules)).filter(|d| *d != m).collect();
        graph.insert(m, deps);
    }
    graph
}

/// The strongly connected components with more than one module (Tarjan).
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<BTreeSet<Module>> {
    struct State<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on: BTreeSet<&'a Module>,
        out: Vec<BTreeSet<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in &s.graph[v] {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = BTreeSet::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on.remove(w);
                comp.insert(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s =
        State { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: vec![], on: BTreeSet::new(), out: vec![] };
    for v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

#[test]
fn the_import_graph_has_no_circle() {
    let graph = import_graph();
    let found: Vec<String> = circles(&graph)
        .iter()
        .map(|c| {
            let edges: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    graph[a].iter().filter(|b| c.contains(*b)).map(move |b| format!("{} -> {}", name(a), name(b)))
                })
                .collect();
            edges.join(", ")
        })
        .collect();
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn no_layer_imports_a_higher_one() {
    let graph = import_graph();
    let rank: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut bad = vec![];
    for (a, deps) in &graph {
        let Some(top_a) = a.first() else { continue };
        let Some(&ra) = rank.get(top_a.as_str()) else {
            bad.push(format!("{} is in no layer: add it to LAYERS", name(a)));
            continue;
        };
        for b in deps {
            let top_b = b.first().map(String::as_str).unwrap_or("crate");
            if top_b == top_a {
                continue;
            }
            match rank.get(top_b) {
                Some(&rb) if rb < ra => {}
                _ => bad.push(format!("{} -> {}", name(a), name(b))),
            }
        }
    }
    assert!(bad.is_empty(), "imports against the layer order:\n{}", bad.join("\n"));
}

/// The reader itself: use trees, `super`, root re-exports, comments, strings and tests.
#[test]
fn the_reader_sees_what_the_compiler_sees() {
    let modules: BTreeSet<Module> = [vec!["a"], vec!["a", "b"], vec!["a", "c"], vec!["error"]]
        .iter()
        .map(|m| m.iter().map(|s| s.to_string()).collect())
        .collect();
    let m: Module = vec!["a".into(), "b".into()];
    let src = r#"
        use super::{c::{X, Y as Z}, self::b::W};
        use crate::Error;
        // use crate::a::c;
        fn f() { let s = "crate::zzz"; let c = '"'; crate::a::c::g::<'static>(); }
        #[cfg(test)]
        mod tests { use crate::nope::X; }
    "#;
    let code = without_tests(&code_only(src));
    let found: BTreeSet<String> =
        paths(&code).iter().filter_map(|p| resolve(&m, p, &modules)).map(|m| name(&m)).collect();
    assert_eq!(found, ["a::b", "a::c", "error"].iter().map(|s| s.to_string()).collect());
    let g: BTreeMap<Module, BTreeSet<Module>> = [
        (vec!["x".to_string()], [vec!["y".to_string()]].into()),
        (vec!["y".to_string()], [vec!["x".to_string()]].into()),
        (vec!["z".to_string()], BTreeSet::new()),
    ]
    .into();
    assert_eq!(circles(&g).len(), 1);
}
