//! Human units in the configuration: durations (`"10s"`, `"1m30s"`) and sizes (`"4MiB"`).

use std::{fmt, str::FromStr, time::Duration};

use serde::{Deserialize, Deserializer, de};

/// A duration written as humans do: `"500ms"`, `"10s"`, `"2m"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct HumanDuration(pub Duration);

impl FromStr for HumanDuration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        conductor_plugin_sdk::duration::parse(s).map(Self)
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&conductor_plugin_sdk::duration::format(self.0))
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(de::Error::custom)
    }
}

/// A size in bytes written with a unit: `"4MiB"`, `"512KiB"`, `"1GB"`, `"100"` (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn as_usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

impl FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let unit_bytes: u64 = match unit.trim() {
            "" | "B" => 1,
            "KB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            other => {
                return Err(format!(
                    "invalid size {s:?}: unknown unit {other:?}; use B, KB, MB, GB, KiB, MiB or GiB"
                ));
            }
        };
        number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(unit_bytes))
            .map(Self)
            .ok_or_else(|| format!("invalid size {s:?}: write a whole number and a unit, e.g. \"4MiB\""))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes", self.0)
    }
}

/// A size as written: a string with a unit, or a plain number of bytes (an integer in TOML, or
/// in a SourcePlugin's YAML).
#[derive(Deserialize)]
#[serde(untagged)]
enum SizeText {
    Bytes(u64),
    Text(String),
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match SizeText::deserialize(d)? {
            SizeText::Bytes(n) => Ok(Self(n)),
            SizeText::Text(text) => text.parse().map_err(de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!("4MiB".parse::<ByteSize>().unwrap().0, 4 << 20);
        assert_eq!("4 MiB".parse::<ByteSize>().unwrap().0, 4 << 20);
        assert_eq!("100".parse::<ByteSize>().unwrap().0, 100);
        assert_eq!("2GB".parse::<ByteSize>().unwrap().0, 2_000_000_000);
        assert!("4XB".parse::<ByteSize>().is_err());
        assert!("MiB".parse::<ByteSize>().is_err());
        assert!("-1MiB".parse::<ByteSize>().is_err());
        assert!("99999999999999GiB".parse::<ByteSize>().is_err());
        let plain: ByteSize = serde_json::from_value(serde_json::json!(1048576)).unwrap();
        assert_eq!(plain.0, 1 << 20, "a plain number of bytes");
        let text: ByteSize = serde_json::from_value(serde_json::json!("1MiB")).unwrap();
        assert_eq!(text.0, 1 << 20);
        assert!(serde_json::from_value::<ByteSize>(serde_json::json!(-1)).is_err());
    }

    #[test]
    fn durations() {
        assert_eq!("10s".parse::<HumanDuration>().unwrap().0, Duration::from_secs(10));
        assert_eq!("1m 30s".parse::<HumanDuration>().unwrap().0, Duration::from_secs(90));
        assert_eq!("250ms".parse::<HumanDuration>().unwrap().0, Duration::from_millis(250));
        assert!("10".parse::<HumanDuration>().is_err());
        assert!("ten seconds".parse::<HumanDuration>().is_err());
    }
}
