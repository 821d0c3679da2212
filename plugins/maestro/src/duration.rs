//! Durations in the plugin's configuration: a number with a unit, `ms`, `s`, `m` or `h`.

/// Milliseconds in `text` (`"250ms"`, `"30s"`, `"5m"`, `"1h"`).
pub fn parse(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit (ms, s, m or h)"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a whole number"))?;
    let scale = match unit.trim() {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        other => return Err(format!("unknown unit {other:?} in {text:?} (ms, s, m or h)")),
    };
    match number.checked_mul(scale) {
        Some(0) | None => Err(format!("{text:?} must be between 1ms and centuries")),
        Some(ms) => Ok(ms),
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn units() {
        assert_eq!(parse("250ms"), Ok(250));
        assert_eq!(parse("30s"), Ok(30_000));
        assert_eq!(parse(" 5m "), Ok(300_000));
        assert_eq!(parse("1h"), Ok(3_600_000));
        for bad in ["5", "m", "5 minutes", "0s", "-1s", "1.5s"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
