//! The layering of host/src (docs/design.md), as a test. Every file belongs to a layer, by the
//! table [`LAYERS`]; a file may import (`crate::...`, `super::...`, or a child module by its
//! name) only from its own layer or a lower one, no two folders of the table may import each
//! other (directly or round a longer circle), and no file may pass [`MAX_LINES`] lines.
//!
//! The source is read as text: comments, strings and character literals are blanked out first
//! (a path in a doc comment is no import), then every `use` item (grouped forms expanded) and
//! every path written inline (`crate::x::y(...)`, `super::x`, or a child module's name,
//! `wasi::x(...)`) is resolved to the file that defines it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The longest a file under host/src may be.
const MAX_LINES: usize = 600;

/// The layers, top to bottom, and the folders (or files) of each: a row is a prefix of a path
/// under host/src; the longest row that matches a file places it. Each row, less its `.rs` or
/// trailing `/`, is one folder for the circle check (`supply/serving.rs` and `supply/serving/`
/// are one).
const LAYERS: &[(&str, u8)] = &[
    // L0: the binary and the CLI (and the crate root, which only declares the modules).
    ("main.rs", 0),
    ("lib.rs", 0),
    ("cli/", 0),
    // L1: the operator's wiring.
    ("operator/", 1),
    // L2: the controllers, and beneath both what both write.
    ("controllers/", 2),
    ("controllers/hikawa/", 2),
    ("controllers/rulesets/", 2),
    ("controllers/writes/", 2),
    ("controllers/error.rs", 2),
    // L3: the module supply.
    ("supply/", 3),
    ("supply/digest.rs", 3),
    ("supply/fetch.rs", 3),
    ("supply/sources/", 3),
    ("supply/oci/", 3),
    ("supply/loader.rs", 3),
    ("supply/disk_cache.rs", 3),
    ("supply/tenant.rs", 3),
    ("supply/shares.rs", 3),
    ("supply/tenant_calls.rs", 3),
    ("supply/cache_shares.rs", 3),
    ("supply/cache_files.rs", 3),
    ("supply/sandbox/", 3),
    ("supply/sandbox/wasi/", 3),
    ("supply/contract/", 3),
    ("supply/serving.rs", 3),
    ("supply/serving/", 3),
    ("supply/tenant.rs", 3),
    // L4: leader election and plumbing.
    ("process/", 4),
    ("process/leader/", 4),
    // L5: the API types.
    ("crd.rs", 5),
    ("crd/", 5),
    ("text.rs", 5),
];

/// Folders of one layer that must not import each other: the two controllers.
const SIBLINGS: [&str; 2] = ["controllers/hikawa", "controllers/rulesets"];

const LAYER_NAMES: [&str; 6] = ["binary and CLI", "the operator's wiring", "controllers", "module supply", "leader election and plumbing", "API types"];

#[test]
fn layers_point_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    read_tree(&src, &src, &mut files);
    assert!(files.len() > 20, "read host/src: {} files", files.len());
    let problems = check(&files);
    assert!(problems.is_empty(), "host/src breaks its layering (docs/design.md):\n{}", problems.join("\n"));
}

fn read_tree(root: &Path, dir: &Path, files: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            read_tree(root, &path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let name = path.strip_prefix(root).unwrap().to_str().unwrap().replace('\\', "/");
            files.insert(name, std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// One import: the file and line it is written at, the path as written, and the file it
/// resolves to.
#[derive(Clone, Debug)]
struct Import {
    file: String,
    line: usize,
    written: String,
    target: String,
}

/// Every problem in the tree `files` (path under src -> text), one line each.
fn check(files: &BTreeMap<String, String>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut imports = Vec::new();
    for (file, text) in files {
        let lines = text.lines().count();
        if lines > MAX_LINES {
            problems.push(format!("{file}: {lines} lines, more than {MAX_LINES}: split it"));
        }
        if place(file).is_none() {
            problems.push(format!("{file}: in no layer of the table (tests/layers.rs LAYERS): add its folder"));
        }
        imports.extend(imports_of(file, text, files));
    }
    // Lower layers import nothing from higher ones.
    for import in &imports {
        let (Some((from, from_layer)), Some((to, to_layer))) = (place(&import.file), place(&import.target)) else { continue };
        if to_layer < from_layer {
            problems.push(format!(
                "{}:{}: `{}`: {from} (L{from_layer} {}) imports {to} (L{to_layer} {}): a lower layer imports a higher one",
                import.file, import.line, import.written, LAYER_NAMES[from_layer as usize], LAYER_NAMES[to_layer as usize]
            ));
        }
    }
    // The controllers stand side by side: neither imports the other's folder (what both
    // write is in controllers/writes/, beneath both; the wiring in operator/ joins them).
    for import in &imports {
        let (Some((from, _)), Some((to, _))) = (place(&import.file), place(&import.target)) else { continue };
        if from != to && SIBLINGS.contains(&from.as_str()) && SIBLINGS.contains(&to.as_str()) {
            problems.push(format!("{}:{}: `{}`: {from} imports {to}: one controller reaches into the other's files", import.file, import.line, import.written));
        }
    }
    // No circle between folders.
    let mut edges: BTreeMap<String, BTreeMap<String, Import>> = BTreeMap::new();
    for import in &imports {
        let (Some((from, _)), Some((to, _))) = (place(&import.file), place(&import.target)) else { continue };
        if from != to {
            edges.entry(from).or_default().entry(to).or_insert_with(|| import.clone());
        }
    }
    for circle in circles(&edges) {
        let by: Vec<String> = circle
            .windows(2)
            .map(|w| {
                let i = &edges[&w[0]][&w[1]];
                format!("{}:{} `{}`", i.file, i.line, i.written)
            })
            .collect();
        problems.push(format!("import circle between folders: {} (by {})", circle.join(" -> "), by.join("; ")));
    }
    problems
}

/// The folder (table row) and layer of a file.
fn place(file: &str) -> Option<(String, u8)> {
    let (row, layer) = LAYERS.iter().filter(|(prefix, _)| file.starts_with(prefix)).max_by_key(|(prefix, _)| prefix.len())?;
    Some((row.trim_end_matches('/').trim_end_matches(".rs").to_string(), *layer))
}

/// The circles between folders, each once, as `a -> b -> ... -> a`: for every import `a -> b`
/// from which `a` can be reached again, the shortest way back.
fn circles(edges: &BTreeMap<String, BTreeMap<String, Import>>) -> Vec<Vec<String>> {
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for (from, tos) in edges {
        for to in tos.keys() {
            // Breadth first from `to` back to `from`.
            let mut back: BTreeMap<String, String> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([to.clone()]);
            let mut reached = to == from;
            while let Some(at) = queue.pop_front() {
                if reached {
                    break;
                }
                for next in edges.get(&at).into_iter().flat_map(|e| e.keys()) {
                    if next != to && !back.contains_key(next) {
                        back.insert(next.clone(), at.clone());
                        if next == from {
                            reached = true;
                            break;
                        }
                        queue.push_back(next.clone());
                    }
                }
            }
            if !reached {
                continue;
            }
            let mut way = vec![from.clone()];
            while way.last() != Some(to) {
                way.push(back[way.last().unwrap()].clone());
            }
            way.reverse();
            let mut circle = vec![from.clone()];
            circle.extend(way.into_iter().filter(|n| n != from));
            circle.push(from.clone());
            if seen.insert(circle[..circle.len() - 1].iter().cloned().collect::<BTreeSet<_>>()) {
                found.push(circle);
            }
        }
    }
    found
}

/// The imports of one file: `use` items and inline paths that start at `crate`, at `super`, or
/// at a child module of the file's own.
fn imports_of(file: &str, text: &str, files: &BTreeMap<String, String>) -> Vec<Import> {
    let code = blank(text);
    let module = module_of(file);
    let inline_mods = inline_modules(&code);
    let line_at = |offset: usize| code[..offset].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut resolve = |segments: Vec<String>, offset: usize| {
        let within: Vec<String> = inline_mods.iter().filter(|(start, end, _)| *start <= offset && offset < *end).map(|(_, _, name)| name.clone()).collect();
        let here: Vec<String> = module.iter().cloned().chain(within).collect();
        if let Some(target) = resolve_path(&here, &segments, files) {
            found.push(Import { file: file.to_string(), line: line_at(offset), written: segments.join("::"), target });
        }
    };
    // `use` items.
    let mut use_spans = Vec::new();
    for (start, _) in code.match_indices("use") {
        let before = code[..start].chars().next_back();
        let after = code[start + 3..].chars().next();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') || !after.is_some_and(char::is_whitespace) {
            continue;
        }
        let Some(len) = code[start..].find(';') else { continue };
        let tokens = tokenize(&code[start + 3..start + len], start + 3);
        let mut paths = Vec::new();
        use_tree(&tokens, &mut 0, &[], &mut paths);
        for (segments, offset) in paths {
            resolve(segments, offset);
        }
        use_spans.push(start..start + len);
    }
    // Paths written inline: from `crate`, `super` or `self`, or from a child module's name (a
    // parent may name its child, `wasi::add_to_linker(..)`, without any `use`); a path whose
    // first segment is none of these (a type, an outside crate) resolves to nothing.
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    for (colons, _) in code.match_indices("::") {
        let start = code[..colons].trim_end_matches(ident).len();
        let before = code[..start].chars().next_back();
        if start == colons || before.is_some_and(|c| ident(c) || c == ':') || use_spans.iter().any(|s| s.contains(&start)) {
            continue;
        }
        let path: String = code[start..].chars().take_while(|&c| ident(c) || c == ':').collect();
        let segments = path.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
        resolve(segments, start);
    }
    found
}

/// The module path of a file: `supply/sandbox/mod.rs` is `supply::sandbox`, `cli/args.rs`
/// `cli::args`, `lib.rs` and `main.rs` the crate root.
fn module_of(file: &str) -> Vec<String> {
    let trimmed = file.trim_end_matches(".rs");
    let mut segments: Vec<String> = trimmed.split('/').map(str::to_string).collect();
    if matches!(segments.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        segments.pop();
    }
    segments
}

/// Inline `mod name { ... }` blocks: (start, end, name), for `super::` inside them.
fn inline_modules(code: &str) -> Vec<(usize, usize, String)> {
    let mut found = Vec::new();
    for (start, _) in code.match_indices("mod ") {
        if code[..start].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[start + 4..];
        let name: String = rest.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let after = rest.trim_start()[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = start + 4 + (rest.len() - after.len());
        let mut depth = 0usize;
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        found.push((open, open + i, name.clone()));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// The file that defines the item a path names, if the path is into this crate.
fn resolve_path(here: &[String], segments: &[String], files: &BTreeMap<String, String>) -> Option<String> {
    let mut absolute: Vec<String> = match segments.first()?.as_str() {
        "crate" => segments[1..].to_vec(),
        "super" => {
            let ups = segments.iter().take_while(|s| *s == "super").count();
            let mut base = here[..here.len().checked_sub(ups)?].to_vec();
            base.extend_from_slice(&segments[ups..]);
            base
        }
        "self" => here.iter().cloned().chain(segments[1..].iter().cloned()).collect(),
        // A child module of this one, by its name (or an outside crate: not ours).
        first => {
            let child: Vec<String> = here.iter().cloned().chain([first.to_string()]).collect();
            module_file(&child, files)?;
            here.iter().cloned().chain(segments.iter().cloned()).collect()
        }
    };
    absolute.retain(|s| s != "self");
    (0..=absolute.len()).rev().find_map(|k| module_file(&absolute[..k], files))
}

fn module_file(module: &[String], files: &BTreeMap<String, String>) -> Option<String> {
    if module.is_empty() {
        return Some("lib.rs".to_string());
    }
    let base = module.join("/");
    [format!("{base}.rs"), format!("{base}/mod.rs")].into_iter().find(|f| files.contains_key(f))
}

#[derive(Debug, PartialEq)]
enum Token {
    Ident(String),
    Punct(char),
}

/// The tokens of a `use` item (after `use`), each with its offset in the file.
fn tokenize(text: &str, base: usize) -> Vec<(Token, usize)> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_alphanumeric() || c == '_' || c == '#' {
            let mut ident = c.to_string();
            while let Some(&(_, d)) = chars.peek() {
                if !(d.is_alphanumeric() || d == '_' || d == '#') {
                    break;
                }
                ident.push(d);
                chars.next();
            }
            tokens.push((Token::Ident(ident.trim_start_matches("r#").to_string()), base + i));
        } else if c == ':' {
            if chars.peek().is_some_and(|&(_, d)| d == ':') {
                chars.next();
            }
            tokens.push((Token::Punct(':'), base + i));
        } else if "{},*".contains(c) {
            tokens.push((Token::Punct(c), base + i));
        }
    }
    tokens
}

/// A use tree: `a::b::{c, d::{e, f}, g as h, self, *}`, each leaf path with its offset.
fn use_tree(tokens: &[(Token, usize)], at: &mut usize, prefix: &[String], out: &mut Vec<(Vec<String>, usize)>) {
    let mut path = prefix.to_vec();
    loop {
        match tokens.get(*at) {
            Some((Token::Ident(name), offset)) => {
                let offset = *offset;
                path.push(name.clone());
                *at += 1;
                match tokens.get(*at) {
                    Some((Token::Punct(':'), _)) => *at += 1,
                    // `x as y`: `y` is a local name, not a path.
                    Some((Token::Ident(word), _)) if word == "as" => {
                        *at += 2;
                        out.push((path, offset));
                        return;
                    }
                    _ => {
                        out.push((path, offset));
                        return;
                    }
                }
            }
            Some((Token::Punct('*'), offset)) => {
                out.push((path, *offset));
                *at += 1;
                return;
            }
            Some((Token::Punct('{'), _)) => {
                *at += 1;
                loop {
                    match tokens.get(*at) {
                        None => return,
                        Some((Token::Punct('}'), _)) => {
                            *at += 1;
                            return;
                        }
                        Some((Token::Punct(','), _)) => *at += 1,
                        Some(_) => use_tree(tokens, at, &path, out),
                    }
                }
            }
            // A leading `::` (an outside crate's path).
            Some((Token::Punct(':'), _)) => *at += 1,
            _ => return,
        }
    }
}

/// `src` with comments, string literals and character literals replaced by spaces (newlines
/// kept, so offsets and lines stay where they were).
fn blank(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank_to = |out: &mut String, from: usize, to: usize, chars: &[char]| {
        for &c in &chars[from..to] {
            out.push(if c == '\n' { '\n' } else { ' ' });
        }
    };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let prev_ident = i > 0 && ident(chars[i - 1]);
        if c == '/' && next == Some('/') {
            let end = (i..chars.len()).find(|&j| chars[j] == '\n').unwrap_or(chars.len());
            blank_to(&mut out, i, end, &chars);
            i = end;
        } else if c == '/' && next == Some('*') {
            let (mut depth, mut j) = (0usize, i);
            while j < chars.len() {
                if chars[j] == '/' && chars.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if chars[j] == '*' && chars.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank_to(&mut out, i, j, &chars);
            i = j;
        } else if !prev_ident && (c == 'r' || (c == 'b' && next == Some('r'))) && {
            let k = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = chars[k.min(chars.len())..].iter().take_while(|&&h| h == '#').count();
            chars.get(k + hashes) == Some(&'"')
        } {
            let k = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = chars[k..].iter().take_while(|&&h| h == '#').count();
            let open = k + hashes;
            let mut j = open + 1;
            while j < chars.len() && !(chars[j] == '"' && chars[j + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes) {
                j += 1;
            }
            let end = (j + 1 + hashes).min(chars.len());
            blank_to(&mut out, i, end, &chars);
            i = end;
        } else if c == '"' || (c == 'b' && !prev_ident && next == Some('"')) {
            let mut j = if c == 'b' { i + 2 } else { i + 1 };
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(chars.len());
            blank_to(&mut out, i, end, &chars);
            i = end;
        } else if c == '\'' && next == Some('\\') {
            let end = (i + 2..chars.len()).find(|&j| chars[j] == '\'').map_or(chars.len(), |j| j + 1);
            blank_to(&mut out, i, end, &chars);
            i = end;
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            blank_to(&mut out, i, i + 3, &chars);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod checker {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> BTreeMap<String, String> {
        files.iter().map(|(f, t)| (f.to_string(), t.to_string())).collect()
    }

    #[test]
    fn the_checker_reports_an_upward_import_a_circle_and_a_long_file() {
        let long = "// a line\n".repeat(MAX_LINES + 1);
        let files = tree(&[
            ("lib.rs", "pub mod controllers;\npub mod supply;\npub mod text;\n"),
            ("controllers/mod.rs", "pub mod hikawa;\npub mod rulesets;\n"),
            ("controllers/hikawa/mod.rs", "pub struct Context;\n"),
            // One controller reaching into the other's files.
            ("controllers/rulesets/mod.rs", "use crate::controllers::hikawa::Context;\n"),
            ("supply/mod.rs", "pub mod sandbox;\npub mod loader;\n"),
            // Upward, in a grouped use: L3 imports L2.
            ("supply/sandbox/mod.rs", "mod host_state;\nmod wasi;\nuse crate::{text::printable, controllers::hikawa::Context};\npub struct Engine;\n"),
            // The circle: host_state -> wasi (a child of sandbox) -> host_state.
            ("supply/sandbox/host_state.rs", "use super::wasi::View;\npub struct HostState;\n"),
            ("supply/sandbox/wasi/mod.rs", "use super::host_state::HostState;\npub trait View {}\n"),
            // Upward, inline; a path in a comment or a string is none.
            ("supply/loader.rs", "// crate::controllers::hikawa::Context\nfn f() { let _ = \"crate::controllers::x\"; let _ = crate::controllers::hikawa::Context; }\n"),
            ("text.rs", &long),
        ]);
        let problems = check(&files);
        let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
        assert!(has("supply/sandbox/mod.rs:3: `crate::controllers::hikawa::Context`: supply/sandbox (L3 module supply) imports controllers/hikawa (L2 controllers)"), "{problems:#?}");
        assert!(has("supply/loader.rs:2: `crate::controllers::hikawa::Context`"), "{problems:#?}");
        assert!(has("import circle between folders: supply/sandbox -> supply/sandbox/wasi -> supply/sandbox"), "{problems:#?}");
        assert!(has("supply/sandbox/host_state.rs:1 `super::wasi::View`") && has("supply/sandbox/wasi/mod.rs:1 `super::host_state::HostState`"), "{problems:#?}");
        assert!(has(&format!("text.rs: {} lines, more than {MAX_LINES}", MAX_LINES + 1)), "{problems:#?}");
        assert!(has("controllers/rulesets/mod.rs:1: `crate::controllers::hikawa::Context`: controllers/rulesets imports controllers/hikawa: one controller reaches into the other's files"), "{problems:#?}");
        assert_eq!(problems.len(), 5, "nothing else (the comment and the string are no imports): {problems:#?}");
    }

    #[test]
    fn a_parent_naming_its_child_inline_without_use_is_an_import() {
        let files = tree(&[
            ("lib.rs", "pub mod supply;\n"),
            ("supply/mod.rs", "pub mod sandbox;\n"),
            // The parent names its child inline, no `use`: an import of supply/sandbox/wasi...
            ("supply/sandbox/mod.rs", "mod wasi;\npub struct Engine;\nfn f() {\n    wasi::add_to_linker();\n}\n"),
            // ...which imports its parent back: a circle, seen only through that inline path.
            ("supply/sandbox/wasi/mod.rs", "use super::Engine;\npub fn add_to_linker() {}\n"),
        ]);
        let problems = check(&files);
        assert_eq!(
            problems,
            ["import circle between folders: supply/sandbox -> supply/sandbox/wasi -> supply/sandbox (by supply/sandbox/mod.rs:4 `wasi::add_to_linker`; supply/sandbox/wasi/mod.rs:1 `super::Engine`)"],
            "{problems:#?}"
        );
    }

    #[test]
    fn imports_that_point_down_pass() {
        let files = tree(&[
            ("lib.rs", "pub mod cli;\npub mod supply;\npub mod crd;\n"),
            ("cli/mod.rs", "use crate::supply::{loader::load, sandbox::{self, Engine as E}};\nfn f() { crate::crd::all(); }\n"),
            ("supply/mod.rs", "pub mod sandbox;\npub mod loader;\npub use loader::load;\n"),
            ("supply/loader.rs", "use crate::supply::sandbox::Engine;\npub fn load() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n"),
            ("supply/sandbox/mod.rs", "pub struct Engine;\nfn c() -> char { '{' }\n"),
            ("crd.rs", "pub fn all() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n"),
        ]);
        assert_eq!(check(&files), Vec::<String>::new());
    }
}
