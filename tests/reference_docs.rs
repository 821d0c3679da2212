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
