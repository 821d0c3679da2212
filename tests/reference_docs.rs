//! The reference pages of the book that cannot drift from the code (issue 38):
//!
//! - `docs/reference/configuration.md` lists every key `conductor.toml` accepts, in its `key` tables,
//!   with its default — and names no key the configuration refuses. The keys are read from the
//!   parser itself: every table of the configuration refuses unknown keys, and its refusal names the
//!   keys it accepts, so a probe key in each table walks the whole tree. A default written as a TOML
//!   value (a cell starting with `` `…` ``) must be the code's: setting the key to it changes
//!   nothing of the parsed configuration.
//! - `docs/reference/cli.md` is the help of every command of the `conductor` binary, as
//!   `conductor help COMMAND…` prints it. `UPDATE_CLI_REFERENCE=1` rewrites the page.
//! - `conductor --version` names the version, the plugin contract of `plugin-sdk/wit/plugin.wit`
//!   and the commit the binary is built from (CHANGELOG.md's entries name their contract).
//! - The module maps (issue 45) name every module there is and none that is not. The modules are
//!   read from the files (`mod x;` outside `#[cfg(test)]`, from `lib.rs` and `main.rs` down); the
//!   maps are the crate docs of `host/src/lib.rs` (its list: a bullet per module of the crate),
//!   `docs/architecture.md`'s "Module layout" (a list per crate, each bullet starting with the
//!   modules it is about in backquotes and a colon, a module's modules nested under it, two levels
//!   named) and the `host/` row of `docs/reference/layout.md` (each module in backquotes, what it
//!   holds in parentheses after it). A module added without an entry, or an entry left for a
//!   module gone, fails with the map, the line and what to write.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use conductor::config::Config;
use conductor_blackbox_tests::conductor_bin;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the repository")
        .to_owned()
}

// --- The configuration reference ------------------------------------------------------------

const CONFIGURATION: &str = "docs/reference/configuration.md";
/// A key no table accepts: each table's refusal of it lists the keys the table accepts.
const PROBE: &str = "zz_not_a_key";
/// A map's entries, whatever their name (`plugins.<name>`, `databases.<name>`).
const ANY: &str = "<*>";

/// The configuration's keys, from the parser: (keys that hold a value, tables).
#[derive(Default, Debug)]
struct AcceptedKeys {
    values: BTreeSet<String>,
    tables: BTreeSet<String>,
}

/// `path` as TOML dotted keys, a map's entry named `x`.
fn dotted(path: &[String]) -> String {
    path.iter()
        .map(|s| if s == ANY { "x".to_owned() } else { s.clone() })
        .collect::<Vec<_>>()
        .join(".")
}

/// The parser's reason for refusing `text`, or `None` when it parses.
fn refusal(text: &str) -> Option<String> {
    Config::parse(text)
        .err()
        .map(|(key, reason)| format!("{key}: {reason}"))
}

/// The keys a refusal of an unknown key says the table accepts (serde's "unknown field `x`,
/// expected one of `a`, `b`" or "expected `a`").
fn expected_keys(reason: &str) -> Vec<String> {
    let Some((_, expected)) = reason.split_once("expected") else {
        return Vec::new();
    };
    expected.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

fn walk(path: &mut Vec<String>, keys: &mut AcceptedKeys) {
    let mut probe = path.clone();
    probe.push(PROBE.to_owned());
    let name = path.join(".");
    match refusal(&format!("{} = 1\n", dotted(&probe))) {
        // A table of named keys: each is walked in turn.
        Some(reason) if reason.contains("unknown field") => {
            let fields = expected_keys(&reason);
            assert!(!fields.is_empty(), "{name}: the refusal names no key: {reason}");
            keys.tables.insert(name);
            for field in fields {
                path.push(field);
                walk(path, keys);
                path.pop();
            }
        }
        // A map whose values are tables (`[plugins.<name>]`): its entries are walked.
        Some(reason) if reason.contains("expected struct") => {
            keys.tables.insert(name);
            path.push(ANY.to_owned());
            walk(path, keys);
            path.pop();
        }
        // Anything else holds a value: a string, a number, a list, a map of values (`[routes]`),
        // a free table (a plugin's `config`).
        _ => {
            keys.values.insert(name);
        }
    }
}

fn accepted_keys() -> AcceptedKeys {
    let mut keys = AcceptedKeys::default();
    walk(&mut Vec::new(), &mut keys);
    keys.tables.remove("");
    keys
}

/// A row of a `| key | default | meaning |` table of the reference.
#[derive(Debug)]
struct DocumentedKey {
    key: String,
    default: String,
    line: usize,
}

/// `[plugins.<name>]` → `plugins.<*>`.
fn normalized(key: &str) -> String {
    key.split('.')
        .map(|s| if s.starts_with('<') && s.ends_with('>') { ANY } else { s })
        .collect::<Vec<_>>()
        .join(".")
}

/// The cells of a Markdown table row (`|` inside code spans does not split a cell).
fn cells(row: &str) -> Vec<String> {
    let row = row.trim().trim_start_matches('|').trim_end_matches('|');
    let mut out = vec![String::new()];
    let mut in_code = false;
    for c in row.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                out.last_mut().unwrap().push(c);
            }
            '|' if !in_code => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out.into_iter().map(|c| c.trim().to_owned()).collect()
}

/// The table a heading documents: the first `` `[…]` `` it names (none: the top-level keys).
fn heading_table(heading: &str) -> String {
    match heading.split_once("`[").and_then(|(_, rest)| rest.split_once("]`")) {
        Some((table, _)) => table.to_owned(),
        None => String::new(),
    }
}

fn documented_keys(text: &str) -> Vec<DocumentedKey> {
    let mut keys = Vec::new();
    let mut table = String::new();
    let mut in_key_table = false;
    let mut in_code = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        if line.starts_with('#') {
            table = heading_table(line);
            in_key_table = false;
            continue;
        }
        if !line.trim_start().starts_with('|') {
            in_key_table = false;
            continue;
        }
        let row = cells(line);
        if row.first().map(String::as_str) == Some("key") {
            assert_eq!(
                row,
                ["key", "default", "meaning"],
                "{CONFIGURATION}:{}: a key table's columns are key, default, meaning",
                i + 1
            );
            in_key_table = true;
            continue;
        }
        if !in_key_table || row.iter().all(|c| c.chars().all(|c| c == '-' || c == ':')) {
            continue;
        }
        let key = row[0].trim_matches('`');
        assert!(
            row[0].starts_with('`') && row[0].ends_with('`') && !key.contains('`'),
            "{CONFIGURATION}:{}: the key cell is one key in backquotes: {line}",
            i + 1
        );
        let full = if table.is_empty() {
            key.to_owned()
        } else {
            format!("{table}.{key}")
        };
        keys.push(DocumentedKey {
            key: normalized(&full),
            default: row.get(1).cloned().unwrap_or_default(),
            line: i + 1,
        });
    }
    keys
}

/// What a table needs besides the key under test for the configuration to parse: its required
/// keys.
fn required(table: &str) -> &'static [(&'static str, &'static str)] {
    match table {
        "plugins.<*>" => &[("kind", "\"memory\"")],
        "server.tls" | "admin.tls" => &[("cert_file", "\"tls.crt\""), ("key_file", "\"tls.key\"")],
        "telemetry.otlp" => &[("endpoint", "\"http://127.0.0.1:4317\"")],
        "databases.<*>.embedded" => &[("data_dir", "\"pg\"")],
        "plugins.<*>.verify" | "dynamic.verify" => &[("public_key_file", "\"cosign.pub\"")],
        _ => &[],
    }
}

/// A configuration with the tables along `key` (a map's entry named `x`) and what each requires,
/// and `key = value` when there is one: each table under a `[table]` header of its own, so that
/// the key's own table exists with or without the key.
fn probe_text(key: &str, value: Option<&str>) -> String {
    let parts: Vec<String> = key.split('.').map(str::to_owned).collect();
    let mut text = String::new();
    for end in 1..parts.len() {
        let table = &parts[..end];
        let needs = required(&table.join("."));
        let parent = end == parts.len() - 1;
        if needs.is_empty() && !parent {
            continue;
        }
        text.push_str(&format!("[{}]\n", dotted(table)));
        for (k, v) in needs {
            if !(parent && parts[end] == *k) {
                text.push_str(&format!("{k} = {v}\n"));
            }
        }
    }
    if let Some(value) = value {
        text.push_str(&format!("{} = {value}\n", parts[parts.len() - 1]));
    }
    text
}

/// The TOML value a default cell starts with (`` `"10s"` (…) `` → `"10s"`), if it starts with
/// code; a default in words is not checked against the code.
fn default_value(cell: &str) -> Option<&str> {
    let rest = cell.strip_prefix('`')?;
    rest.split_once('`').map(|(value, _)| value)
}

#[test]
fn the_configuration_reference_names_every_key_with_its_default_and_no_other() {
    let text = std::fs::read_to_string(repo().join(CONFIGURATION)).unwrap();
    let documented = documented_keys(&text);
    let accepted = accepted_keys();
    assert!(
        accepted.values.len() > 100 && accepted.values.contains("server.listen"),
        "the walk found {accepted:?}"
    );
    let mut problems = Vec::new();

    let mut seen = BTreeMap::new();
    for d in &documented {
        if let Some(first) = seen.insert(d.key.clone(), d.line) {
            problems.push(format!(
                "{CONFIGURATION}:{}: `{}` is documented twice (first at line {first})",
                d.line, d.key
            ));
        }
        if !accepted.values.contains(&d.key) && !accepted.tables.contains(&d.key) {
            problems.push(format!(
                "{CONFIGURATION}:{}: `{}` is not a key conductor.toml accepts",
                d.line, d.key
            ));
        }
        if d.default.is_empty() {
            problems.push(format!("{CONFIGURATION}:{}: `{}` has no default", d.line, d.key));
        }
    }
    for key in &accepted.values {
        if !seen.contains_key(key) {
            problems.push(format!(
                "`{key}` is accepted but not in {CONFIGURATION}: add a row (key, default, meaning) to the table of its section"
            ));
        }
    }

    // Each default written as a value is the code's: setting the key to it is the same
    // configuration as leaving it out.
    for d in &documented {
        let Some(value) = default_value(&d.default) else {
            continue;
        };
        if !accepted.values.contains(&d.key) {
            continue;
        }
        let without = Config::parse(&probe_text(&d.key, None)).map(|c| format!("{c:?}"));
        let set = Config::parse(&probe_text(&d.key, Some(value))).map(|c| format!("{c:?}"));
        match (without, set) {
            (Ok(without), Ok(set)) if without == set => {}
            (Ok(_), Ok(_)) => problems.push(format!(
                "{CONFIGURATION}:{}: `{}`'s default is not {value}: setting it changes the configuration",
                d.line, d.key
            )),
            (Err(e), _) => problems.push(format!(
                "{CONFIGURATION}:{}: `{}`: the configuration around it does not parse ({e:?}): add what its table requires to required() in tests/reference_docs.rs",
                d.line, d.key
            )),
            (Ok(_), Err(e)) => problems.push(format!(
                "{CONFIGURATION}:{}: `{}`'s default {value} is not a value it accepts ({e:?}); write a default that is not one in words, not in backquotes",
                d.line, d.key
            )),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// --- The command-line reference -------------------------------------------------------------

const CLI: &str = "docs/reference/cli.md";

/// `conductor help COMMAND…`, with no environment (the flags' `[env: …]` show no value).
fn help(command: &[String]) -> String {
    let out = Command::new(conductor_bin())
        .arg("help")
        .args(command)
        .env_clear()
        .output()
        .expect("conductor runs");
    assert!(
        out.status.success(),
        "conductor help {}: {}",
        command.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The subcommands a help text lists under `Commands:` (but `help`).
fn subcommands(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in help.lines() {
        if line == "Commands:" {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if !line.starts_with("  ") {
            break;
        }
        // A command's line starts two spaces in; a description running on is indented more.
        if line.starts_with("   ") {
            continue;
        }
        if let Some(name) = line.split_whitespace().next()
            && name != "help"
        {
            out.push(name.to_owned());
        }
    }
    out
}

fn cli_page() -> String {
    let mut page = String::from(
        "# Command-line reference\n\n\
         <!-- Generated by tests/reference_docs.rs from `conductor help`: do not edit. Regenerate with\n     \
         UPDATE_CLI_REFERENCE=1 cargo test -p conductor-blackbox-tests --test reference_docs -->\n\n\
         Every command of `conductor`, as `conductor help COMMAND` prints it (`conductor COMMAND --help`\n\
         prints the same). A flag's `[env: NAME=]` is the environment variable that sets it too.\n",
    );
    let mut queue = vec![Vec::<String>::new()];
    while let Some(command) = queue.pop() {
        let text = help(&command);
        let name = std::iter::once("conductor".to_owned())
            .chain(command.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
        page.push_str(&format!("\n## `{name}`\n\n```text\n{}\n```\n", text.trim_end()));
        // Depth first, in the order the help lists them.
        for sub in subcommands(&text).into_iter().rev() {
            let mut next = command.clone();
            next.push(sub);
            queue.push(next);
        }
    }
    page
}

#[test]
fn the_command_line_reference_is_the_help_of_every_command() {
    let page = cli_page();
    let path = repo().join(CLI);
    if std::env::var_os("UPDATE_CLI_REFERENCE").is_some() {
        std::fs::write(&path, &page).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current != page {
        let first = current
            .lines()
            .zip(page.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(current.lines().count().min(page.lines().count()));
        panic!(
            "{CLI} is not the help of the conductor binary (from line {}: {:?}, the binary says {:?}); \
             regenerate it: UPDATE_CLI_REFERENCE=1 cargo test -p conductor-blackbox-tests --test reference_docs",
            first + 1,
            current.lines().nth(first).unwrap_or("<end of file>"),
            page.lines().nth(first).unwrap_or("<end of output>"),
        );
    }
    assert!(page.contains("## `conductor serve`") && page.contains("## `conductor plugins inspect`"));
}

#[test]
fn the_version_names_the_plugin_contract_and_the_commit() {
    let wit = std::fs::read_to_string(repo().join("plugin-sdk/wit/plugin.wit")).unwrap();
    let contract = wit
        .lines()
        .find_map(|l| l.trim().strip_prefix("package conductor:plugin@")?.strip_suffix(';'))
        .expect("the WIT names its package");
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(repo())
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim()[..12].to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    let out = Command::new(conductor_bin())
        .arg("--version")
        .output()
        .expect("conductor runs");
    let line = String::from_utf8(out.stdout).expect("UTF-8");
    assert_eq!(
        line.trim(),
        format!(
            "conductor {} (plugin contract {contract}, commit {head})",
            env!("CARGO_PKG_VERSION")
        )
    );
    let changelog = std::fs::read_to_string(repo().join("CHANGELOG.md")).unwrap();
    assert!(
        changelog.contains(&format!("## [Unreleased] — plugin contract {contract}")),
        "CHANGELOG.md's Unreleased entry names the contract the code serves ({contract})"
    );
}

// --- The module maps ------------------------------------------------------------------------

const ARCHITECTURE: &str = "docs/architecture.md";
const LAYOUT: &str = "docs/reference/layout.md";
/// How deep `docs/architecture.md` maps a crate: its modules and theirs (`plugins`,
/// `plugins/wasm`). Deeper modules may be named, and then must exist.
const ARCHITECTURE_DEPTH: usize = 2;

/// A crate's modules, read from its files: `a`, `a/b`, … for every `mod x;` (any visibility,
/// outside `#[cfg(test)]`) of its roots (`lib.rs`, `main.rs`) and of the files they lead to, with
/// the file each is in. A module written inline (`mod x { … }`) is part of its file, not one of
/// these.
#[derive(Debug, Default)]
struct ModuleTree {
    modules: BTreeMap<String, PathBuf>,
}

impl ModuleTree {
    /// The modules under `src` (a crate's `src/`) reached from the given roots that exist.
    fn read(src: &Path, roots: &[&str]) -> Result<Self, String> {
        let mut tree = Self::default();
        let mut found = false;
        for root in roots {
            let file = src.join(root);
            if file.is_file() {
                found = true;
                tree.walk(&file, src, "")?;
            }
        }
        if !found {
            return Err(format!("{} holds none of {roots:?}", src.display()));
        }
        Ok(tree)
    }

    /// The modules `file` (the module `prefix`, its children's files under `children`) declares.
    fn walk(&mut self, file: &Path, children: &Path, prefix: &str) -> Result<(), String> {
        let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let here = file.parent().expect("a source file is in a folder");
        let mut attributes: Vec<String> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.starts_with("#[") {
                attributes.push(line.split_whitespace().collect());
                continue;
            }
            if line.is_empty() || line.starts_with("//") {
                continue;
            }
            let attrs = std::mem::take(&mut attributes);
            let Some(name) = declared_module(line) else {
                continue;
            };
            if attrs.iter().any(|a| a == "#[cfg(test)]") {
                continue;
            }
            let candidates = match attrs.iter().find_map(|a| path_attribute(a)) {
                Some(path) => vec![here.join(path)],
                None => vec![children.join(format!("{name}.rs")), children.join(name).join("mod.rs")],
            };
            let existing: Vec<&PathBuf> = candidates.iter().filter(|p| p.is_file()).collect();
            let [module_file] = existing[..] else {
                return Err(format!(
                    "{}:{}: `mod {name};` is in {} of {:?}",
                    file.display(),
                    i + 1,
                    existing.len(),
                    candidates
                ));
            };
            let path = if prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{prefix}/{name}")
            };
            // `x/mod.rs` holds its children beside it, `x.rs` in `x/`.
            let grandchildren = if module_file.file_name().is_some_and(|n| n == "mod.rs") {
                module_file.parent().expect("in a folder").to_owned()
            } else {
                module_file.with_extension("")
            };
            self.modules.insert(path.clone(), module_file.clone());
            self.walk(module_file, &grandchildren, &path)?;
        }
        Ok(())
    }

    /// The modules at most `depth` deep (1: the crate's own).
    fn down_to(&self, depth: usize) -> impl Iterator<Item = &String> {
        self.modules.keys().filter(move |m| m.split('/').count() <= depth)
    }
}

fn is_identifier(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// The module a line declares in a file of its own (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared_module(line: &str) -> Option<&str> {
    let mut rest = line;
    if let Some(after) = rest.strip_prefix("pub") {
        let after = after.trim_start();
        rest = match after.strip_prefix('(') {
            Some(scope) => scope.split_once(')')?.1.trim_start(),
            None => after,
        };
    }
    let name = rest.strip_prefix("mod ")?.trim().strip_suffix(';')?.trim();
    is_identifier(name).then_some(name)
}

/// `#[path="x/y.rs"]` (whitespace removed) → `x/y.rs`.
fn path_attribute(attribute: &str) -> Option<&str> {
    attribute.strip_prefix("#[path=\"")?.strip_suffix("\"]")
}

/// A module a map names, and the line that names it.
#[derive(Debug)]
struct MapEntry {
    module: String,
    line: usize,
}

/// The text of a bullet before its first colon outside backquotes: the modules it is about.
/// Only backquoted names (`name`, `name/` for a module with modules of its own, [`name`] as a
/// rustdoc link), commas and "and" may stand there.
fn bullet_names(text: &str) -> Result<Vec<String>, String> {
    let mut in_code = false;
    let colon = text.char_indices().find_map(|(i, c)| match c {
        '`' => {
            in_code = !in_code;
            None
        }
        ':' if !in_code => Some(i),
        _ => None,
    });
    let Some(colon) = colon else {
        return Err("it has no colon after the modules it names".to_owned());
    };
    let head = &text[..colon];
    let mut names = Vec::new();
    for (i, part) in head.split('`').enumerate() {
        if i % 2 == 1 {
            let name = part.trim_end_matches('/');
            let valid = name.split('/').all(|s| is_identifier(s) || s.ends_with(".rs"));
            if !valid {
                return Err(format!("`{part}` is not a module's name"));
            }
            names.push(name.to_owned());
        } else if part
            .split(|c: char| c.is_whitespace() || matches!(c, ',' | '[' | ']'))
            .any(|w| !w.is_empty() && w != "and")
        {
            return Err(format!(
                "{head:?} holds more than module names: start the bullet with the modules in backquotes and a colon"
            ));
        }
    }
    if names.is_empty() {
        return Err("it names no module before its colon".to_owned());
    }
    Ok(names)
}

/// The modules a bullet list names: each bullet's names (see [`bullet_names`]), and a bullet
/// nested under one naming module `m` names modules of `m` (`m/child`). `lines` are the list's
/// lines with their line numbers; a line that is not a bullet continues the one above it.
fn list_entries(doc: &str, lines: &[(usize, String)], problems: &mut Vec<String>) -> Vec<MapEntry> {
    // (indent, line, text) of each bullet, its continuation lines joined.
    let mut bullets: Vec<(usize, usize, String)> = Vec::new();
    for (number, line) in lines {
        let indent = line.len() - line.trim_start().len();
        match line.trim_start().strip_prefix("- ") {
            Some(text) => bullets.push((indent, *number, text.to_owned())),
            None => {
                if let Some(last) = bullets.last_mut() {
                    last.2.push(' ');
                    last.2.push_str(line.trim());
                }
            }
        }
    }
    let mut entries = Vec::new();
    // The bullets enclosing the current one: (indent, the one module it names, if one).
    let mut parents: Vec<(usize, Option<String>)> = Vec::new();
    for (indent, line, text) in bullets {
        while parents.last().is_some_and(|(i, _)| *i >= indent) {
            parents.pop();
        }
        let prefix = match parents.last() {
            None => Some(String::new()),
            Some((_, Some(parent))) => Some(format!("{parent}/")),
            Some((_, None)) => None,
        };
        let names = match (bullet_names(&text), prefix) {
            (Ok(names), Some(prefix)) => names.into_iter().map(|n| format!("{prefix}{n}")).collect::<Vec<_>>(),
            (Ok(_), None) => {
                problems.push(format!(
                    "{doc}:{line}: this bullet is nested under one that names several modules: nest it under a bullet of its own module"
                ));
                Vec::new()
            }
            (Err(why), _) => {
                problems.push(format!(
                    "{doc}:{line}: this bullet does not start with the modules it is about: {why}"
                ));
                Vec::new()
            }
        };
        let single = match &names[..] {
            [one] => Some(one.clone()),
            _ => None,
        };
        parents.push((indent, single));
        entries.extend(names.into_iter().map(|module| MapEntry { module, line }));
    }
    entries
}

/// The first bullet list of `text` from line `from` (1-based): its lines, with their numbers.
fn first_list(text: &str, from: usize) -> Vec<(usize, String)> {
    let mut list = Vec::new();
    for (i, line) in text.lines().enumerate().skip(from.saturating_sub(1)) {
        let is_bullet = line.trim_start().starts_with("- ");
        if list.is_empty() {
            if is_bullet {
                list.push((i + 1, line.to_owned()));
            }
            continue;
        }
        // The list goes on with bullets and lines indented under them.
        if line.trim().is_empty() || !(is_bullet || line.starts_with(' ')) {
            break;
        }
        list.push((i + 1, line.to_owned()));
    }
    list
}

/// Where a map and the tree disagree: modules down to `depth` the map does not name, and
/// entries naming no module (`x.rs` names a file of `src`). `how` says how to add a module's
/// entry.
fn compare(
    doc: &str,
    crate_src: &str,
    src: &Path,
    tree: &ModuleTree,
    entries: &[MapEntry],
    depth: usize,
    how: &dyn Fn(&str) -> String,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut named = BTreeMap::new();
    for entry in entries {
        if let Some(first) = named.insert(entry.module.as_str(), entry.line) {
            problems.push(format!(
                "{doc}:{}: `{}` is named twice (first at line {first}): keep one entry",
                entry.line, entry.module
            ));
        }
        let exists = if entry.module.ends_with(".rs") {
            src.join(&entry.module).is_file()
        } else {
            tree.modules.contains_key(&entry.module)
        };
        if !exists {
            problems.push(format!(
                "{doc}:{}: `{}` names no module of {crate_src} (no `mod` outside `#[cfg(test)]` declares it): remove the entry, or rename it to the module's name now",
                entry.line, entry.module
            ));
        }
    }
    for module in tree.down_to(depth) {
        if !named.contains_key(module.as_str()) {
            let file = tree.modules[module].strip_prefix(src).unwrap_or(&tree.modules[module]);
            problems.push(format!(
                "{crate_src}{} (module `{module}`) is not named in {doc}: {}",
                file.display(),
                how(module)
            ));
        }
    }
    problems
}

/// `host/src/lib.rs`'s crate docs map the crate's own modules: the first list of the crate
/// docs (`//!`) names each, one bullet per module or group of modules, and names no other.
fn check_crate_docs(src: &Path, crate_src: &str) -> Vec<String> {
    let doc = format!("{crate_src}lib.rs");
    let tree = match ModuleTree::read(src, &["lib.rs"]) {
        Ok(tree) => tree,
        Err(e) => return vec![e],
    };
    let text = std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    // The crate docs, line numbers kept.
    let docs: String = text
        .lines()
        .map(|l| match l.trim_start().strip_prefix("//!") {
            Some(d) => d.strip_prefix(' ').unwrap_or(d),
            None => "",
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut problems = Vec::new();
    let entries = list_entries(&doc, &first_list(&docs, 1), &mut problems);
    problems.extend(compare(
        &doc,
        crate_src,
        src,
        &tree,
        &entries,
        1,
        &|module| {
            format!(
                "add \"//! - [`{module}`]: what it is for;\" to the list of the crate docs (without the [] of a link for a private module)"
            )
        },
    ));
    problems
}

/// `docs/architecture.md`'s "Module layout": each list that a line starting with
/// `` `<crate>/src/` `` introduces maps that crate's modules down to [`ARCHITECTURE_DEPTH`].
/// Returns the crates it maps, and the problems.
fn check_architecture(repo: &Path, text: &str) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut crates = Vec::new();
    let Some(start) = text.lines().position(|l| l.trim() == "## Module layout") else {
        return (
            crates,
            vec![format!("{ARCHITECTURE} has no \"## Module layout\" section")],
        );
    };
    for (i, line) in text.lines().enumerate().skip(start + 1) {
        if line.starts_with("## ") {
            break;
        }
        let Some(crate_src) = line
            .strip_prefix('`')
            .and_then(|l| l.split_once('`'))
            .map(|(path, _)| path)
            .filter(|p| p.ends_with("/src/"))
        else {
            continue;
        };
        crates.push(crate_src.to_owned());
        let src = repo.join(crate_src);
        let tree = match ModuleTree::read(&src, &["lib.rs", "main.rs"]) {
            Ok(tree) => tree,
            Err(e) => {
                problems.push(format!("{ARCHITECTURE}:{}: {e}", i + 1));
                continue;
            }
        };
        let entries = list_entries(ARCHITECTURE, &first_list(text, i + 2), &mut problems);
        problems.extend(compare(
            ARCHITECTURE,
            crate_src,
            &src,
            &tree,
            &entries,
            ARCHITECTURE_DEPTH,
            &|module| match module.rsplit_once('/') {
                None => format!(
                    "add \"- `{module}`: what it is for.\" to the {crate_src} list of \"Module layout\""
                ),
                Some((parent, child)) => format!(
                    "add \"- `{child}`: what it is for.\" to the {crate_src} list of \"Module layout\", nested under the bullet of `{parent}`"
                ),
            },
        ));
    }
    (crates, problems)
}

/// `docs/reference/layout.md`'s `host/` row names each of the host's modules in backquotes,
/// what it holds in parentheses after it: the backquoted names after the cell's first colon and
/// outside parentheses are the map.
fn check_layout(src: &Path, text: &str) -> Vec<String> {
    let tree = match ModuleTree::read(src, &["lib.rs", "main.rs"]) {
        Ok(tree) => tree,
        Err(e) => return vec![e],
    };
    let Some((number, row)) = text.lines().enumerate().find(|(_, l)| l.starts_with("| `host/` |")) else {
        return vec![format!("{LAYOUT} has no `host/` row")];
    };
    let cell = cells(row).get(1).cloned().unwrap_or_default();
    let mut entries = Vec::new();
    let mut problems = Vec::new();
    let (mut in_code, mut depth, mut after_colon) = (false, 0usize, false);
    let mut name = String::new();
    for c in cell.chars() {
        match c {
            '`' if in_code => {
                in_code = false;
                if after_colon && depth == 0 {
                    if is_identifier(&name) {
                        entries.push(MapEntry {
                            module: name.clone(),
                            line: number + 1,
                        });
                    } else {
                        problems.push(format!(
                            "{LAYOUT}:{}: the `host/` row names `{name}` where a module's name belongs: write \"`module` (what it holds)\", anything else inside the parentheses",
                            number + 1
                        ));
                    }
                }
                name.clear();
            }
            '`' => in_code = true,
            c if in_code => name.push(c),
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ':' if depth == 0 => after_colon = true,
            _ => {}
        }
    }
    problems.extend(compare(LAYOUT, "host/src/", src, &tree, &entries, 1, &|module| {
        format!("add \"`{module}` (what it holds)\" to the `host/` row")
    }));
    problems
}

/// The module maps name every module there is and none that is not: the crate docs of
/// `host/src/lib.rs` (the map), `docs/architecture.md`'s "Module layout" and the `host/` row of
/// `docs/reference/layout.md`. Each is read as the doc comments of [`check_crate_docs`],
/// [`check_architecture`] and [`check_layout`] say; the modules are read from the files.
#[test]
fn the_module_maps_name_every_module_and_no_other() {
    let repo = repo();
    let host = repo.join("host/src");
    let mut problems = check_crate_docs(&host, "host/src/");
    let architecture = std::fs::read_to_string(repo.join(ARCHITECTURE)).unwrap();
    let (crates, more) = check_architecture(&repo, &architecture);
    problems.extend(more);
    assert_eq!(
        crates,
        ["host/src/", "plugin-sdk/src/"],
        "{ARCHITECTURE}'s \"Module layout\" maps the host and the plugin SDK"
    );
    let layout = std::fs::read_to_string(repo.join(LAYOUT)).unwrap();
    problems.extend(check_layout(&host, &layout));
    assert!(
        problems.is_empty(),
        "the module maps and the tree disagree:\n{}",
        problems.join("\n")
    );
}

/// A deliberate error in each direction — a module no map names, an entry naming no module —
/// fails the check of each map.
#[test]
fn a_module_missing_from_a_map_or_an_entry_for_no_module_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("host/src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::create_dir_all(src.join("b")).unwrap();
    let write = |path: &str, text: &str| std::fs::write(src.join(path), text).unwrap();
    write(
        "lib.rs",
        "//! The crate.\n//!\n//! - [`a`]: one;\n//! - [`gone`]: no longer here.\n\npub mod a;\n\
         pub(crate) mod b;\n#[cfg(test)]\nmod tests;\n#[path = \"elsewhere.rs\"]\nmod moved;\n",
    );
    write("a/mod.rs", "mod c;\nmod inline {\n    fn f() {}\n}\n");
    write("a/c.rs", "");
    write("b.rs", "//! b\n\n    mod d;\n");
    write("b/d.rs", "");
    write("elsewhere.rs", "");
    write("main.rs", "fn main() {}\n");

    let tree = ModuleTree::read(&src, &["lib.rs", "main.rs"]).unwrap();
    assert_eq!(
        tree.modules.keys().collect::<Vec<_>>(),
        ["a", "a/c", "b", "b/d", "moved"]
    );

    let crate_docs = check_crate_docs(&src, "host/src/").join("\n");
    for expected in [
        "host/src/lib.rs:4: `gone` names no module",
        "host/src/b.rs (module `b`) is not named in host/src/lib.rs",
        "host/src/elsewhere.rs (module `moved`) is not named",
    ] {
        assert!(crate_docs.contains(expected), "{expected:?} not in:\n{crate_docs}");
    }
    assert!(!crate_docs.contains("`a`"), "{crate_docs}");

    let page = "# x\n\n## Module layout\n\n`host/src/`:\n\n- `main.rs`: the command.\n- `a/`: one.\n  \
                - `c`: its child.\n  - `ghost`: nothing.\n- `b`, `moved`: others.\n- the rest: prose.\n\n\
                Other folders:\n\n- `x`: not checked.\n";
    let (crates, problems) = check_architecture(root, page);
    assert_eq!(crates, ["host/src/"]);
    let problems = problems.join("\n");
    for expected in [
        "docs/architecture.md:10: `a/ghost` names no module",
        "docs/architecture.md:12: this bullet does not start with the modules it is about",
        "host/src/b/d.rs (module `b/d`) is not named in docs/architecture.md",
    ] {
        assert!(problems.contains(expected), "{expected:?} not in:\n{problems}");
    }
    assert_eq!(problems.lines().count(), 3, "{problems}");

    let layout = "| path | what |\n|---|---|\n| `host/` | the `conductor` binary (`host/src/lib.rs`): \
                  `a` (one: `x`), `nope` (none) |\n";
    let problems = check_layout(&src, layout).join("\n");
    for expected in [
        "docs/reference/layout.md:3: `nope` names no module",
        "(module `b`) is not named in docs/reference/layout.md",
        "(module `moved`) is not named in docs/reference/layout.md",
    ] {
        assert!(problems.contains(expected), "{expected:?} not in:\n{problems}");
    }
    assert_eq!(problems.lines().count(), 3, "{problems}");
}
