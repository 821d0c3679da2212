//! A transaction's `BEGIN` sent with its first statements, or its last statements with its
//! `COMMIT`, in one message (`pg.begin-with`, `transaction.commit-with`): one round trip where
//! sqlx, which pipelines nothing, takes one for each statement and one for each of `BEGIN` and
//! `COMMIT`.
//!
//! The message is a simple query: `BEGIN; EXECUTE conductor_3(…); EXECUTE conductor_7(…)`.
//! PostgreSQL runs its statements one after the other, each with a snapshot of its own, and stops
//! at the first that fails. Each statement is a prepared statement of the server session,
//! `PREPARE`d through the extended protocol the first time the session meets it (which also
//! refuses a text holding two commands), so PostgreSQL parses and plans it as it does the
//! statements sqlx prepares. Its parameters are written into the `EXECUTE` as string literals
//! (`E'…'`, every quote and backslash doubled; `NULL` as such), which PostgreSQL reads with the
//! input function of the parameter's type: the type sqlx binds for the same value.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Mutex;

use chrono::{SecondsFormat, TimeDelta, TimeZone, Utc};
use conductor_plugin_sdk::PgValue;
use conductor_plugin_sdk::pg::Statement;
use futures::TryStreamExt;
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, Either};

use super::session::Session;

/// How many statements one process names; a call with a statement past them sends its statements
/// one at a time instead (a plugin that writes values into its SQL would otherwise prepare a new
/// statement in every session for every call).
pub const MOST_NAMED: usize = 256;

/// The prefix of the prepared statements' names: `conductor_<number>`.
const PREFIX: &str = "conductor_";

/// The statements named in this process: the same text with the same parameter types is the same
/// prepared statement in every session.
#[derive(Default)]
pub struct Named {
    numbers: Mutex<Numbers>,
}

/// Each statement's text, the parameter types it was named with, and its number.
#[derive(Default)]
struct Numbers {
    by_text: HashMap<String, Vec<(Vec<&'static str>, u32)>>,
    given: u32,
}

impl Named {
    /// The number of `statement` (its text and its parameters' types), given now if new; `None`
    /// past [`MOST_NAMED`]. A statement already named is found without copying it.
    fn number(&self, statement: &Statement) -> Option<u32> {
        let types = || statement.params.iter().map(parameter_type);
        // A panic while holding the lock leaves a map of names, still whole.
        let mut numbers = self.numbers.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let known = numbers
            .by_text
            .get(&statement.sql)
            .and_then(|named| named.iter().find(|(named, _)| named.iter().copied().eq(types())));
        if let Some(&(_, number)) = known {
            return Some(number);
        }
        if numbers.given as usize >= MOST_NAMED {
            return None;
        }
        let number = numbers.given;
        numbers.given += 1;
        numbers
            .by_text
            .entry(statement.sql.clone())
            .or_default()
            .push((types().collect(), number));
        Some(number)
    }
}

/// The type of the parameter sqlx binds for `value` (`capabilities::pg::bind`).
fn parameter_type(value: &PgValue) -> &'static str {
    match value {
        PgValue::Null | PgValue::Text(_) => "text",
        PgValue::Bool(_) => "bool",
        PgValue::Int4(_) => "int4",
        PgValue::Int8(_) => "int8",
        PgValue::Float8(_) => "float8",
        PgValue::Json(_) => "jsonb",
        PgValue::Timestamp(_) => "timestamptz",
        PgValue::Bytea(_) => "bytea",
    }
}

/// `text` as a string literal that means it whatever `standard_conforming_strings` says: its
/// runs without a quote or a backslash copied whole (a batch's statuses are kilobytes).
fn quoted(text: &str, out: &mut String) {
    out.reserve(text.len() + 3);
    out.push_str("E'");
    let mut rest = text;
    while let Some(at) = rest.find(['\'', '\\']) {
        let (plain, special) = rest.split_at(at);
        out.push_str(plain);
        out.push_str(if special.starts_with('\'') { "''" } else { "\\\\" });
        rest = &special[1..];
    }
    out.push_str(rest);
    out.push('\'');
}

/// `value` as the literal of an `EXECUTE` argument: the text its type's input function reads.
fn literal(value: &PgValue, out: &mut String) -> Result<(), String> {
    let text = match value {
        PgValue::Null => {
            out.push_str("NULL");
            return Ok(());
        }
        PgValue::Bool(b) => b.to_string(),
        PgValue::Int4(i) => i.to_string(),
        PgValue::Int8(i) => i.to_string(),
        PgValue::Float8(f) if f.is_nan() => "NaN".to_owned(),
        PgValue::Float8(f) if f.is_infinite() => if *f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned(),
        // The shortest text that reads back as the same number.
        PgValue::Float8(f) => f.to_string(),
        PgValue::Text(s) | PgValue::Json(s) => {
            if s.contains('\0') {
                return Err("contains a NUL character, which PostgreSQL's text cannot hold".to_owned());
            }
            quoted(s, out);
            return Ok(());
        }
        PgValue::Timestamp(t) => {
            // Whole microseconds, cut as sqlx cuts them (toward the year 2000).
            let epoch = Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).single().ok_or("no epoch")?;
            let micros = (*t - epoch)
                .num_microseconds()
                .ok_or_else(|| format!("{t} is out of PostgreSQL's range"))?;
            (epoch + TimeDelta::microseconds(micros)).to_rfc3339_opts(SecondsFormat::Micros, true)
        }
        PgValue::Bytea(b) => {
            let mut hex = String::with_capacity(2 + 2 * b.len());
            hex.push_str("\\x");
            for byte in b {
                let _ = write!(hex, "{byte:02x}");
            }
            hex
        }
    };
    quoted(&text, out);
    Ok(())
}

/// Why statements sent together did not all run.
#[derive(Debug)]
pub struct Failed {
    /// The statement (its position among the call's), or `None` for the `BEGIN` or the `COMMIT`.
    pub statement: Option<usize>,
    pub error: Failure,
}

#[derive(Debug)]
pub enum Failure {
    /// Refused before anything was sent.
    Parameter(String),
    Sql(sqlx::Error),
}

impl Failed {
    fn sql(statement: Option<usize>, error: sqlx::Error) -> Self {
        Self {
            statement,
            error: Failure::Sql(error),
        }
    }

    /// Whether the server refused it (the session is sound; a transaction is aborted, or ended).
    pub fn refused_by_server(&self) -> bool {
        matches!(
            self.error,
            Failure::Sql(sqlx::Error::Database(_)) | Failure::Parameter(_)
        )
    }
}

/// What goes around the statements: the `BEGIN` before them, the `COMMIT` after.
#[derive(Debug, Clone, Copy)]
pub struct Around {
    pub begin: Option<&'static str>,
    pub commit: bool,
}

/// Sends `statements` in one message on `session`, with `around`, and returns each statement's
/// rows; with nothing to send (no statement, no `BEGIN`, no `COMMIT`), sends nothing. `Ok(None)`:
/// a statement could not be named ([`MOST_NAMED`]) and nothing was sent.
pub async fn run(
    named: &Named,
    session: &mut Session,
    around: Around,
    statements: &[Statement],
) -> Result<Option<Vec<Vec<PgRow>>>, Failed> {
    if statements.is_empty() && around.begin.is_none() && !around.commit {
        return Ok(Some(Vec::new()));
    }
    let mut numbers = Vec::with_capacity(statements.len());
    for statement in statements {
        match named.number(statement) {
            Some(number) => numbers.push(number),
            None => return Ok(None),
        }
    }
    let text = message(around, statements, &numbers)?;
    prepare(session, statements, &numbers).await?;
    let result = send(session, around, text, statements.len()).await;
    if let Err(Failed {
        error: Failure::Sql(sqlx::Error::Database(e)),
        ..
    }) = &result
    {
        // `invalid_sql_statement_name`: a statement was deallocated behind this host's back.
        if e.code().as_deref() == Some("26000") {
            session.forget();
        }
    }
    result.map(Some)
}

/// The simple query: the `BEGIN`, an `EXECUTE` for each statement, the `COMMIT`.
fn message(around: Around, statements: &[Statement], numbers: &[u32]) -> Result<String, Failed> {
    let mut text = String::new();
    if let Some(begin) = around.begin {
        text.push_str(begin);
        text.push_str("; ");
    }
    for (n, (statement, number)) in statements.iter().zip(numbers).enumerate() {
        let _ = write!(text, "EXECUTE {PREFIX}{number}");
        for (i, value) in statement.params.iter().enumerate() {
            text.push_str(if i == 0 { "(" } else { ", " });
            literal(value, &mut text).map_err(|reason| Failed {
                statement: Some(n),
                error: Failure::Parameter(format!("parameter ${}: {reason}", i + 1)),
            })?;
        }
        if !statement.params.is_empty() {
            text.push(')');
        }
        text.push_str("; ");
    }
    if around.commit {
        text.push_str("COMMIT");
    }
    Ok(text)
}

/// Prepares in `session` the statements it does not have; first asks which it has, once.
async fn prepare(session: &mut Session, statements: &[Statement], numbers: &[u32]) -> Result<(), Failed> {
    if session.prepared().is_none() {
        let names: Vec<String> =
            sqlx::query_scalar("SELECT name FROM pg_prepared_statements WHERE starts_with(name, $1)")
                .bind(PREFIX)
                .fetch_all(&mut **session)
                .await
                .map_err(|e| Failed::sql(None, e))?;
        let held: HashSet<u32> = names
            .iter()
            .filter_map(|name| name.strip_prefix(PREFIX)?.parse().ok())
            .collect();
        session.know(held);
    }
    for (n, (statement, &number)) in statements.iter().zip(numbers).enumerate() {
        if session.prepared().is_some_and(|held| held.contains(&number)) {
            continue;
        }
        let mut text = format!("PREPARE {PREFIX}{number}");
        for (i, value) in statement.params.iter().enumerate() {
            text.push_str(if i == 0 { "(" } else { ", " });
            text.push_str(parameter_type(value));
        }
        if !statement.params.is_empty() {
            text.push(')');
        }
        text.push_str(" AS ");
        text.push_str(&statement.sql);
        // Through the extended protocol, which refuses a text of two commands; not cached by sqlx.
        sqlx::query(AssertSqlSafe(text))
            .persistent(false)
            .execute(&mut **session)
            .await
            .map_err(|e| Failed::sql(Some(n), e))?;
        session.add(number);
    }
    Ok(())
}

/// Sends `text` and splits what comes back by statement: each ends with its command's result.
async fn send(session: &mut Session, around: Around, text: String, count: usize) -> Result<Vec<Vec<PgRow>>, Failed> {
    let leading = usize::from(around.begin.is_some());
    // Which statement the `done`-th result (counting from 0) belongs to.
    let position = |done: usize| done.checked_sub(leading).filter(|&n| n < count);
    let mut all: Vec<Vec<PgRow>> = Vec::with_capacity(count);
    let mut current = Vec::new();
    let mut done = 0;
    let mut results = sqlx::raw_sql(AssertSqlSafe(text)).fetch_many(&mut **session);
    loop {
        match results.try_next().await {
            Ok(Some(Either::Right(row))) => current.push(row),
            Ok(Some(Either::Left(_))) => {
                if position(done).is_some() {
                    all.push(std::mem::take(&mut current));
                }
                done += 1;
            }
            Ok(None) => break,
            Err(e) => return Err(Failed::sql(position(done), e)),
        }
    }
    let expected = leading + count + usize::from(around.commit);
    if done != expected {
        return Err(Failed::sql(
            None,
            sqlx::Error::Protocol(format!("{done} results for {expected} commands")),
        ));
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn literal_of(value: &PgValue) -> String {
        let mut out = String::new();
        literal(value, &mut out).unwrap();
        out
    }

    #[test]
    fn quotes_and_backslashes_are_doubled_in_an_escape_string() {
        assert_eq!(
            literal_of(&PgValue::Text(r"it's a \ and a \'".into())),
            r"E'it''s a \\ and a \\'''"
        );
        assert_eq!(
            literal_of(&PgValue::Json(r#"{"a":"\"q\""}"#.into())),
            r#"E'{"a":"\\"q\\""}'"#
        );
        assert_eq!(literal_of(&PgValue::Null), "NULL");
    }

    #[test]
    fn numbers_timestamps_and_bytes_are_written_as_their_types_read_them() {
        assert_eq!(literal_of(&PgValue::Int8(i64::MIN)), "E'-9223372036854775808'");
        assert_eq!(literal_of(&PgValue::Float8(f64::NAN)), "E'NaN'");
        assert_eq!(literal_of(&PgValue::Float8(f64::NEG_INFINITY)), "E'-Infinity'");
        assert_eq!(literal_of(&PgValue::Float8(0.1)), "E'0.1'");
        assert_eq!(literal_of(&PgValue::Bool(false)), "E'false'");
        assert_eq!(literal_of(&PgValue::Bytea(vec![0, 0xab])), r"E'\\x00ab'");
        let t = Utc.with_ymd_and_hms(2026, 12, 7, 8, 0, 0).unwrap() + TimeDelta::nanoseconds(1_234_567);
        assert_eq!(literal_of(&PgValue::Timestamp(t)), "E'2026-12-07T08:00:00.001234Z'");
    }

    #[test]
    fn a_nul_character_is_refused() {
        let mut out = String::new();
        assert!(literal(&PgValue::Text("a\0b".into()), &mut out).is_err());
    }

    #[test]
    fn the_same_text_and_types_is_the_same_statement() {
        let named = Named::default();
        let text = Statement::new("SELECT $1", vec![PgValue::Text("t".into())]);
        let a = named.number(&text);
        assert_eq!(
            named.number(&Statement::new("SELECT $1", vec![PgValue::Null])),
            a,
            "both text"
        );
        assert_ne!(named.number(&Statement::new("SELECT $1", vec![PgValue::Int8(1)])), a);
        for n in 2..MOST_NAMED {
            assert!(named.number(&Statement::new(format!("SELECT {n}"), vec![])).is_some());
        }
        assert_eq!(named.number(&Statement::new("SELECT 'one too many'", vec![])), None);
        assert_eq!(named.number(&text), a, "a named statement keeps its number");
    }

    #[test]
    fn the_message_begins_executes_and_commits() {
        let statements = [
            Statement::new("SELECT $1, $2", vec![PgValue::Int4(1), PgValue::Null]),
            Statement::new("SELECT 1", vec![]),
        ];
        let around = Around {
            begin: Some("BEGIN"),
            commit: true,
        };
        assert_eq!(
            message(around, &statements, &[3, 4]).unwrap(),
            "BEGIN; EXECUTE conductor_3(E'1', NULL); EXECUTE conductor_4; COMMIT"
        );
        let bad = [Statement::new("SELECT $1", vec![PgValue::Text("\0".into())])];
        let failed = message(around, &bad, &[0]).unwrap_err();
        assert_eq!(failed.statement, Some(0));
        assert!(matches!(failed.error, Failure::Parameter(ref m) if m.starts_with("parameter $1")));
    }
}
