//! The layout's invariants, read from the sources themselves
//! (docs/architecture.md, "Crates"): no import cycle among the files of
//! any crate of the workspace, nor among its top-level modules (a crate's
//! folders are floors whose arrows only point down), files and functions
//! a reader can hold (at most [`MAX_FILE_LINES`] lines of code before a
//! file's tests, at most [`MAX_FUNCTION_LINES`] lines per function outside
//! tests), and the reference client and conformance runner
//! (`pilotage-client`) free of wasmtime and sqlx.
//!
//! Imports are read as a reader of the code would: `use` lines and
//! `crate::`/`super::`/`self::` paths anywhere in a file, a `use` of a
//! child module declared in the same file, and re-exports followed to the
//! file that defines the name. Edges into a crate root (`lib.rs`,
//! `main.rs`) are left out: the root is the facade every file may name.
//! Run alone: `cargo test -p pilotage --test all layout`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::support::repository;

/// A module path inside one crate (`[]` is the root).
type ModulePath = Vec<String>;

/// One crate's files: module path → file, and what each file imports.
struct CrateFiles {
    files: BTreeMap<ModulePath, PathBuf>,
    texts: BTreeMap<ModulePath, String>,
}

/// Every `src/` folder of a package under `root`, skipping build output,
/// dependencies installed into the checkout and the fuzz workspace.
fn crate_sources(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        if dir.join("Cargo.toml").is_file() && dir.join("src").is_dir() {
            found.push(dir.join("src"));
        }
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() && !matches!(name.as_str(), "target" | "node_modules" | "fuzz" | ".git" | "src") {
                pending.push(path);
            }
        }
    }
    found.sort();
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name != "bin") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The text without comments, and without the contents of string literals
/// (a path written inside a message is not an import).
fn code_only(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut index = 0;
    while index < bytes.len() {
        let rest = &text[index..];
        if rest.starts_with("//") {
            index += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            index += rest.find("*/").map_or(rest.len(), |end| end + 2);
            out.push(' ');
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") {
            let hashes = rest[1..].chars().take_while(|c| *c == '#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            index += body + rest[body..].find(&close).map_or(rest.len() - body, |end| end + close.len());
            out.push_str("\"\"");
        } else if rest.starts_with('"') {
            let mut end = 1;
            let rest_bytes = rest.as_bytes();
            while end < rest_bytes.len() && rest_bytes[end] != b'"' {
                end += if rest_bytes[end] == b'\\' { 2 } else { 1 };
            }
            index += (end + 1).min(rest.len());
            out.push_str("\"\"");
        } else if rest.starts_with("'\"'") {
            index += 3;
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            index += c.len_utf8();
        }
    }
    out
}

fn read_crate(src: &Path) -> CrateFiles {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    let mut files = BTreeMap::new();
    let mut texts = BTreeMap::new();
    for path in paths {
        let relative = path.strip_prefix(src).unwrap().with_extension("");
        let mut module: ModulePath = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
        if module == ["lib"] || module == ["main"] {
            module.clear();
        } else if module.last().is_some_and(|last| last == "mod") {
            module.pop();
        }
        let text = code_only(&std::fs::read_to_string(&path).unwrap());
        files.entry(module.clone()).or_insert(path);
        texts.entry(module).or_insert(text);
    }
    CrateFiles { files, texts }
}

/// The offset of the brace closing the one at `open` (the end of `bytes`
/// when it is never closed).
fn closing_brace(bytes: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (index, byte) in bytes.iter().enumerate().skip(open) {
        match byte {
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return index;
                }
            }
            _ => {}
        }
    }
    bytes.len()
}

/// The inline modules of a file (`mod name { … }`), as (start, end, name)
/// byte ranges of their bodies, so a `super::` inside `mod tests` means the
/// file's own module.
fn inline_modules(text: &str) -> Vec<(usize, usize, String)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut search = 0;
    while let Some(offset) = text[search..].find("mod ") {
        let start = search + offset;
        search = start + 4;
        if text[..start].chars().next_back().is_some_and(is_identifier_char) {
            continue;
        }
        let rest = &text[search..];
        let length = rest.find(|c: char| !is_identifier_char(c)).unwrap_or(rest.len());
        let name = &rest[..length];
        let after = rest[length..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = search + length + (rest[length..].len() - after.len());
        let end = closing_brace(bytes, open);
        found.push((open, end, name.to_owned()));
    }
    found
}

/// The module a position of a file is in: the file's own, then the inline
/// modules around the position.
fn module_at(file: &ModulePath, inline: &[(usize, usize, String)], position: usize) -> ModulePath {
    let mut module = file.clone();
    module.extend(
        inline.iter().filter(|(start, end, _)| *start < position && position < *end).map(|(_, _, n)| n.clone()),
    );
    module
}

/// `a::{b, c::{d, e as f}}` → `a::b`, `a::c::d`, `a::c::e as f`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else { return vec![tree.to_owned()] };
    let close = tree.rfind('}').unwrap_or(tree.len());
    let head = &tree[..open];
    let mut parts = Vec::new();
    let (mut depth, mut current) = (0, String::new());
    for c in tree[open + 1..close].chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            parts.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    parts.push(current);
    let mut out = Vec::new();
    for part in parts.iter().filter(|part| !part.trim().is_empty()) {
        for tail in expand(part) {
            out.push(if tail == "self" { head.trim_end_matches("::").to_owned() } else { format!("{head}{tail}") });
        }
    }
    out
}

/// Child modules declared in a file (`mod name;` or `mod name {`).
fn declared_children(text: &str) -> BTreeSet<String> {
    let mut children = BTreeSet::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let Some(position) = words.iter().position(|word| *word == "mod")
            && let Some(name) = words.get(position + 1)
        {
            let name = name.trim_end_matches([';', '{']);
            if !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                children.insert(name.to_owned());
            }
        }
    }
    children
}

/// An absolute module path for `segments` as written in module `here`, or
/// `None` for a path into another crate.
fn resolve(segments: &[&str], here: &ModulePath, children: &BTreeSet<String>) -> Option<ModulePath> {
    let first = *segments.first()?;
    let (mut base, rest): (ModulePath, &[&str]) = match first {
        "crate" => (Vec::new(), &segments[1..]),
        "self" | "super" => (here.clone(), segments),
        child if children.contains(child) => (here.clone(), segments),
        _ => return None,
    };
    let mut rest = rest;
    while let Some(&step) = rest.first() {
        match step {
            "self" => {}
            "super" => {
                base.pop()?;
            }
            _ => break,
        }
        rest = &rest[1..];
    }
    base.extend(rest.iter().map(|s| (*s).to_owned()));
    Some(base)
}

fn is_identifier_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every `use` tree of a file with where it starts and whether it is a
/// re-export (`pub use`).
fn use_trees(text: &str) -> Vec<(usize, bool, String)> {
    let mut trees = Vec::new();
    let mut search = 0;
    while let Some(found) = text[search..].find("use ") {
        let start = search + found;
        search = start + 4;
        if text[..start].chars().next_back().is_some_and(is_identifier_char) {
            continue;
        }
        let Some(end) = text[search..].find(';') else { break };
        let tree = text[search..search + end].to_owned();
        let before = text[..start].trim_end();
        let public = before.ends_with("pub")
            || (before.ends_with(')')
                && before.rfind("pub(").is_some_and(|p| before[p..].find(')') == Some(before.len() - p - 1)));
        trees.push((start, public, tree));
        search += end;
    }
    trees
}

/// `crate::…`, `super::…` and `self::…` paths written anywhere, with
/// where each starts.
fn inline_paths(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut paths = Vec::new();
    for start_word in ["crate::", "super::", "self::"] {
        let mut search = 0;
        while let Some(found) = text[search..].find(start_word) {
            let start = search + found;
            search = start + start_word.len();
            if text[..start].chars().next_back().is_some_and(|c| is_identifier_char(c) || c == ':') {
                continue;
            }
            let mut segments = vec![start_word.trim_end_matches(':').to_owned()];
            let mut rest = &text[search..];
            loop {
                let length = rest.find(|c: char| !is_identifier_char(c)).unwrap_or(rest.len());
                if length == 0 {
                    break;
                }
                segments.push(rest[..length].to_owned());
                rest = &rest[length..];
                if !rest.starts_with("::") {
                    break;
                }
                rest = &rest[2..];
            }
            // `use super::{…}` is read by the `use` trees, name by name.
            if segments.len() > 1 {
                paths.push((start, segments));
            }
        }
    }
    paths
}

/// The import graph of one crate: file → files it imports.
fn import_graph(files: &CrateFiles) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut reexports: HashMap<(ModulePath, String), ModulePath> = HashMap::new();
    let mut imports: BTreeMap<ModulePath, Vec<ModulePath>> = BTreeMap::new();
    for (module, text) in &files.texts {
        let children = declared_children(text);
        let inline = inline_modules(text);
        let mut paths = Vec::new();
        for (position, public, tree) in use_trees(text) {
            let here = module_at(module, &inline, position);
            for tail in expand(&tree) {
                let (path, alias) = match tail.split_once(" as ") {
                    Some((path, alias)) => (path.trim().to_owned(), Some(alias.trim().to_owned())),
                    None => (tail.trim().to_owned(), None),
                };
                let segments: Vec<&str> = path.split("::").map(str::trim).filter(|s| !s.is_empty()).collect();
                let Some(absolute) = resolve(&segments, &here, &children) else { continue };
                if public
                    && here == *module
                    && let Some(last) = absolute.last()
                {
                    reexports.insert((module.clone(), alias.unwrap_or_else(|| last.clone())), absolute.clone());
                }
                paths.push(absolute);
            }
        }
        for (position, segments) in inline_paths(text) {
            let here = module_at(module, &inline, position);
            let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
            if let Some(absolute) = resolve(&segments, &here, &children) {
                paths.push(absolute);
            }
        }
        imports.insert(module.clone(), paths);
    }
    let target = |absolute: &ModulePath| -> Option<ModulePath> {
        let mut path = absolute.clone();
        for _ in 0..8 {
            let known = (0..=path.len()).rev().find(|n| files.files.contains_key(&path[..*n]))?;
            match path.get(known).and_then(|name| reexports.get(&(path[..known].to_vec(), name.clone()))) {
                Some(real) => {
                    let mut next = real.clone();
                    next.extend_from_slice(&path[known + 1..]);
                    if next == path {
                        return Some(path[..known].to_vec());
                    }
                    path = next;
                }
                None => return Some(path[..known].to_vec()),
            }
        }
        None
    };
    let mut graph = BTreeMap::new();
    for (module, paths) in &imports {
        let from = files.files[module].clone();
        let edges: &mut BTreeSet<PathBuf> = graph.entry(from.clone()).or_default();
        for path in paths {
            if let Some(to) = target(path)
                && !to.is_empty()
                && to != *module
            {
                edges.insert(files.files[&to].clone());
            }
        }
    }
    graph
}

/// Strongly connected components of more than one file (Tarjan).
fn cycles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: HashMap<&'g PathBuf, usize>,
        low: HashMap<&'g PathBuf, usize>,
        stack: Vec<&'g PathBuf>,
        on_stack: BTreeSet<&'g PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    fn visit<'g>(walk: &mut Walk<'g>, node: &'g PathBuf) {
        let number = walk.index.len();
        walk.index.insert(node, number);
        walk.low.insert(node, number);
        walk.stack.push(node);
        walk.on_stack.insert(node);
        for next in walk.graph.get(node).into_iter().flatten() {
            if !walk.index.contains_key(next) {
                visit(walk, next);
                let low = walk.low[next].min(walk.low[node]);
                walk.low.insert(node, low);
            } else if walk.on_stack.contains(next) {
                let low = walk.index[next].min(walk.low[node]);
                walk.low.insert(node, low);
            }
        }
        if walk.low[node] == walk.index[node] {
            let mut component = Vec::new();
            while let Some(member) = walk.stack.pop() {
                walk.on_stack.remove(member);
                component.push(member.clone());
                if member == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                walk.found.push(component);
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node) {
            visit(&mut walk, node);
        }
    }
    walk.found
}

#[test]
fn no_import_cycle_among_the_files_of_any_crate() {
    let root = repository();
    let mut found = Vec::new();
    let sources = crate_sources(&root);
    assert!(sources.len() >= 10, "the workspace's crates were not found under {}", root.display());
    for src in sources {
        for component in cycles(&import_graph(&read_crate(&src))) {
            let names: Vec<String> =
                component.iter().map(|path| path.strip_prefix(&root).unwrap_or(path).display().to_string()).collect();
            found.push(format!("cycle of {}: {}", names.len(), names.join(", ")));
        }
    }
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

/// The files' import graph folded onto the crate's top-level modules: a
/// file counts as the first segment of its module path (the root, the
/// facade, is left out), and imports within one module vanish.
fn module_graph(
    files: &CrateFiles,
    graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let top: BTreeMap<&PathBuf, PathBuf> = files
        .files
        .iter()
        .filter_map(|(module, file)| module.first().map(|first| (file, PathBuf::from(first))))
        .collect();
    let mut folded: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (from, targets) in graph {
        let Some(from) = top.get(from) else { continue };
        let arrows = folded.entry(from.clone()).or_default();
        for target in targets {
            if let Some(target) = top.get(target)
                && target != from
            {
                arrows.insert(target.clone());
            }
        }
    }
    folded
}

#[test]
fn no_import_cycle_among_the_top_level_modules_of_any_crate() {
    let root = repository();
    let mut found = Vec::new();
    for src in crate_sources(&root) {
        let files = read_crate(&src);
        for component in cycles(&module_graph(&files, &import_graph(&files))) {
            let names: Vec<String> = component.iter().map(|module| module.display().to_string()).collect();
            let crate_dir = src.strip_prefix(&root).unwrap_or(&src).display().to_string();
            found.push(format!("{crate_dir}: cycle of {}: {}", names.len(), names.join(", ")));
        }
    }
    assert!(found.is_empty(), "module cycles:\n{}", found.join("\n"));
}

/// The bad case: the reader finds a cycle through a re-export and a child
/// `use`, the shapes the layout rules out.
#[test]
fn the_cycle_reader_finds_a_cycle_through_a_reexport() {
    let dir = std::env::temp_dir().join(format!("pilotage-layout-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "mod inner;\npub use inner::Thing;\n").unwrap();
    std::fs::write(src.join("a/inner.rs"), "use crate::b::Other;\npub struct Thing;\n").unwrap();
    std::fs::write(
        src.join("b.rs"),
        "// crate::nothing here\nuse crate::a::Thing;\npub struct Other;\nfn f() -> &'static str { \"crate::a::x\" }\n",
    )
    .unwrap();
    // Not a cycle: a test module's `super::*` is its own file.
    std::fs::write(src.join("a/tidy.rs"), "pub fn g() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "mod inner;\nmod tidy;\npub use inner::Thing;\nuse self::tidy::g;\n").unwrap();
    let files = read_crate(&src);
    let found = cycles(&import_graph(&files));
    let modules = cycles(&module_graph(&files, &import_graph(&files)));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(modules, [vec![PathBuf::from("a"), PathBuf::from("b")]], "the modules' cycle: {modules:?}");
    assert_eq!(found.len(), 1, "{found:?}");
    let mut names: Vec<String> =
        found[0].iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["b.rs", "inner.rs"]);
}

/// The most lines of a source file before its tests (`#[cfg(test)] mod
/// tests`); files named `tests.rs` are tests.
const MAX_FILE_LINES: usize = 900;
/// The most lines of one function outside tests, from its `fn` line to its
/// closing brace.
const MAX_FUNCTION_LINES: usize = 150;

/// `text` with comments, string and character literals blanked (newlines
/// kept, so lines and byte offsets stay those of `text`): what is left are
/// the braces that shape the code.
fn masked(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for byte in &mut out[from..to.min(bytes.len())] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    let mut index = 0;
    while index < bytes.len() {
        let rest = &bytes[index..];
        let end = if rest.starts_with(b"//") {
            index + rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len())
        } else if rest.starts_with(b"/*") {
            index + rest.windows(2).position(|w| w == b"*/").map_or(rest.len(), |end| end + 2)
        } else if rest.starts_with(b"r#\"") || rest.starts_with(b"r\"") {
            let hashes = rest[1..].iter().take_while(|b| **b == b'#').count();
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            let body = 2 + hashes;
            index
                + body
                + rest[body..]
                    .windows(close.len())
                    .position(|w| w == close)
                    .map_or(rest.len() - body, |end| end + close.len())
        } else if rest[0] == b'"' {
            let mut end = 1;
            while end < rest.len() && rest[end] != b'"' {
                end += if rest[end] == b'\\' { 2 } else { 1 };
            }
            index + (end + 1).min(rest.len())
        } else if rest[0] == b'\'' && rest.len() > 2 && (rest[2] == b'\'' || rest[1] == b'\\') {
            // A character literal ('{', '\''), not a lifetime.
            let from = if rest[1] == b'\\' { 3 } else { 2 };
            index + rest[from..].iter().position(|b| *b == b'\'').map_or(rest.len(), |end| from + end + 1)
        } else {
            index += 1;
            continue;
        };
        blank(&mut out, index, end);
        index = end.max(index + 1);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The code of a file before its unit tests.
fn before_tests(masked: &str) -> &str {
    let mut search = 0;
    while let Some(found) = masked[search..].find("#[cfg(test)]") {
        let at = search + found;
        if masked[at + "#[cfg(test)]".len()..].trim_start().starts_with("mod ") {
            return &masked[..at];
        }
        search = at + 1;
    }
    masked
}

/// The functions of `code` (masked) longer than `limit` lines: (name,
/// lines). A function without a body (a trait's declaration) has none.
fn long_functions(code: &str, limit: usize) -> Vec<(String, usize)> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut offset = 0;
    for line in code.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(at) = words.iter().position(|word| *word == "fn") else { continue };
        let qualifiers = &words[..at];
        if !qualifiers.iter().all(|word| {
            word.starts_with("pub") || matches!(*word, "async" | "const" | "unsafe" | "extern" | "\"C\"" | "default")
        }) {
            continue;
        }
        let Some(name) = words.get(at + 1) else { continue };
        let name: String = name.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        // The body opens at the first `{` outside parentheses; a `;` first
        // means no body.
        let mut depth = 0i32;
        let mut open = None;
        for (index, byte) in bytes.iter().enumerate().skip(start) {
            match byte {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    open = Some(index);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let close = closing_brace(bytes, open);
        let lines = code[start..close].matches('\n').count() + 1;
        if lines > limit {
            found.push((name, lines));
        }
    }
    found
}

#[test]
fn no_source_file_or_function_is_too_long_to_read() {
    let root = repository();
    let mut found = Vec::new();
    for src in crate_sources(&root) {
        let mut paths = Vec::new();
        rust_files(&src, &mut paths);
        for path in paths.iter().filter(|path| path.file_name().is_some_and(|name| name != "tests.rs")) {
            let text = masked(&std::fs::read_to_string(path).unwrap());
            let code = before_tests(&text);
            let shown = path.strip_prefix(&root).unwrap_or(path).display().to_string();
            let lines = code.lines().count();
            if lines > MAX_FILE_LINES {
                found.push(format!("{shown}: {lines} lines before its tests (at most {MAX_FILE_LINES})"));
            }
            for (name, lines) in long_functions(code, MAX_FUNCTION_LINES) {
                found.push(format!("{shown}: fn {name} is {lines} lines (at most {MAX_FUNCTION_LINES})"));
            }
        }
    }
    assert!(found.is_empty(), "too long to read:\n{}", found.join("\n"));
}

/// Both polarities of the length reader: a function one line over the
/// bound is found, one at it is not, braces in strings, comments and
/// character literals do not count, and a trait's bodiless `fn` is none.
#[test]
fn the_length_reader_measures_functions_from_fn_to_closing_brace() {
    let body = |lines: usize| "    let _ = '{';\n".repeat(lines - 2);
    let text = format!(
        "pub(crate) async fn long() {{\n{}}}\nfn fits() -> u8 {{ // }}}}\n{}}}\ntrait T {{\n    fn declared(&self);\n}}\nconst S: &str = \"fn fake() {{\";\n#[cfg(test)]\nmod tests {{\n    fn test_only() {{\n{}    }}\n}}\n",
        body(11),
        body(10),
        body(30)
    );
    let code = masked(&text);
    let code = before_tests(&code);
    assert_eq!(long_functions(code, 10), [("long".to_owned(), 11)]);
    assert_eq!(long_functions(code, 11), []);
    assert!(!code.contains("test_only"), "a file's tests are not measured");
}

/// Packages `package` depends on, directly or not, as Cargo.lock records
/// them (every feature of the workspace unified: a superset of what any
/// one build compiles).
fn locked_dependencies(package: &str) -> BTreeSet<String> {
    let lock = std::fs::read_to_string(repository().join("Cargo.lock")).unwrap();
    let lock: toml::Value = toml::from_str(&lock).unwrap();
    let mut depends: HashMap<String, Vec<String>> = HashMap::new();
    for entry in lock["package"].as_array().unwrap() {
        let name = entry["name"].as_str().unwrap().to_owned();
        let dependencies = entry
            .get("dependencies")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|d| d.as_str())
            .map(|d| d.split(' ').next().unwrap_or(d).to_owned());
        depends.entry(name).or_default().extend(dependencies);
    }
    let mut seen = BTreeSet::new();
    let mut pending = vec![package.to_owned()];
    while let Some(next) = pending.pop() {
        for dependency in depends.get(&next).into_iter().flatten() {
            if seen.insert(dependency.clone()) {
                pending.push(dependency.clone());
            }
        }
    }
    seen
}

#[test]
fn the_client_and_conformance_runner_need_neither_wasmtime_nor_sqlx() {
    let client = locked_dependencies("pilotage-client");
    assert!(client.contains("rmcp"), "the lock file's graph of pilotage-client was not read: {client:?}");
    for heavy in ["wasmtime", "sqlx", "pilotage-engine", "pilotage-store", "pilotage-server"] {
        assert!(!client.contains(heavy), "pilotage-client depends on {heavy}");
    }
    // The bad case: the server does link both.
    let server = locked_dependencies("pilotage-server");
    assert!(server.contains("wasmtime") && server.contains("sqlx"));
}

#[test]
fn only_the_engine_links_wasmtime() {
    for crate_name in ["pilotage-store", "pilotage-client", "pilotage-telemetry", "pilotage-protocol"] {
        assert!(!locked_dependencies(crate_name).contains("wasmtime"), "{crate_name} depends on wasmtime");
    }
    assert!(locked_dependencies("pilotage-engine").contains("wasmtime"));
    assert!(!locked_dependencies("pilotage-engine").contains("sqlx"), "the engine knows nothing of SQL");
    assert!(!locked_dependencies("pilotage-store").contains("wasmtime"), "the store knows nothing of wasm");
}
