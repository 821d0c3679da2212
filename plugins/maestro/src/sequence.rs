//! Status ordering by `sequenceid`: snowflake ids (bwmarrin/snowflake layout) that the work agent
//! stamps on its status updates (`docs/maestro-database.md` §5.2).

/// A snowflake id: 41 bits of milliseconds, 10 bits of node, 12 bits of step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snowflake {
    pub time: i64,
    pub node: i64,
    pub step: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    #[error("sequence id {0:?} is not a decimal int64")]
    NotANumber(String),
    #[error("sequence ids {0} and {1} come from different nodes")]
    DifferentNodes(i64, i64),
}

impl Snowflake {
    pub fn parse(s: &str) -> Result<Self, SequenceError> {
        let id: i64 = s.trim().parse().map_err(|_| SequenceError::NotANumber(s.to_owned()))?;
        Ok(Self {
            time: id >> 22,
            node: (id >> 12) & 0x3FF,
            step: id & 0xFFF,
        })
    }
}

/// Whether `new` is newer than `stored`: no stored id means newer; otherwise both must parse and
/// come from the same node, and `(time, step)` must be greater.
pub fn is_newer(new: &str, stored: Option<&str>) -> Result<bool, SequenceError> {
    let Some(stored) = stored.filter(|s| !s.is_empty()) else {
        return Ok(true);
    };
    let (n, s) = (Snowflake::parse(new)?, Snowflake::parse(stored)?);
    if n.node != s.node {
        return Err(SequenceError::DifferentNodes(n.node, s.node));
    }
    Ok((n.time, n.step) > (s.time, s.step))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(time: i64, node: i64, step: i64) -> String {
        ((time << 22) | (node << 12) | step).to_string()
    }

    #[test]
    fn newer_means_later_time_or_step_on_the_same_node() {
        assert_eq!(is_newer(&id(10, 1, 0), None), Ok(true));
        assert_eq!(is_newer(&id(10, 1, 0), Some("")), Ok(true));
        assert_eq!(is_newer(&id(11, 1, 0), Some(&id(10, 1, 5))), Ok(true));
        assert_eq!(is_newer(&id(10, 1, 6), Some(&id(10, 1, 5))), Ok(true));
        assert_eq!(is_newer(&id(10, 1, 5), Some(&id(10, 1, 5))), Ok(false));
        assert_eq!(is_newer(&id(9, 1, 9), Some(&id(10, 1, 0))), Ok(false));
        assert_eq!(
            is_newer(&id(11, 2, 0), Some(&id(10, 1, 0))),
            Err(SequenceError::DifferentNodes(2, 1))
        );
        assert!(matches!(is_newer("x", Some("1")), Err(SequenceError::NotANumber(_))));
        // The golden status vector's (deterministic) id.
        assert_eq!(
            Snowflake::parse("1930000000000000001").unwrap(),
            Snowflake {
                time: 460_147_857_666,
                node: 16,
                step: 1
            }
        );
    }
}
