//! Durations as conductor writes them everywhere (`conductor.toml`, plugin settings, the load
//! tool's options): humantime's syntax, `"500ms"`, `"10s"`, `"2m"`, `"1h 30m"`.

use std::time::Duration;

/// Parses `text` (surrounding whitespace ignored); the error says what was wrong and shows the
/// syntax.
pub fn parse(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("invalid duration {text:?} ({e}); write e.g. \"500ms\", \"10s\", \"2m\""))
}

/// `d` as [`parse`] reads it back (`"1m 30s"`).
pub fn format(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_it_writes() {
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse(" 30s "), Ok(Duration::from_secs(30)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(
            parse(&format(Duration::from_millis(90_500))),
            Ok(Duration::from_millis(90_500))
        );
        for bad in ["5", "m", "ten", "-1s", "10x"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(bad) && e.contains("\"10s\""), "{e}");
        }
    }
}
