//! The open-file limit (`RLIMIT_NOFILE`): every agent connection is a file descriptor, so
//! conductor raises its soft limit to the hard one at startup (as Go's runtime does for every Go
//! program, OCM's servers among them), and says when `server.max_connections` asks for more
//! connections than the limit leaves room for.

/// Descriptors kept for what is not an agent connection: the listeners, admin endpoint and API
/// server connections, database pools, plugin and certificate files, the runtime's own.
pub const RESERVED: u64 = 256;

/// The limit conductor runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    pub soft: u64,
    pub hard: u64,
    /// The soft limit before it was raised, when it was.
    pub raised_from: Option<u64>,
}

impl FdLimit {
    /// Agent connections that fit besides [`RESERVED`].
    pub fn connections(&self) -> u64 {
        self.soft.saturating_sub(RESERVED)
    }

    /// A warning when `max_connections` does not fit: past what does, accepting fails with
    /// "too many open files" instead of the limit's refusal.
    pub fn warning(&self, max_connections: usize) -> Option<String> {
        let wanted = u64::try_from(max_connections).unwrap_or(u64::MAX);
        (wanted > self.connections()).then(|| {
            format!(
                "server.max_connections: {max_connections} connections asked for, but the open-file limit ({} soft, {} hard) leaves room for about {}: past that, connections fail with \"too many open files\" instead of being refused; raise the limit (the container's or unit's nofile) or lower server.max_connections",
                self.soft,
                self.hard,
                self.connections()
            )
        })
    }
}

mod nofile;

/// The limit as it is, without changing it.
pub fn current() -> std::io::Result<FdLimit> {
    let (soft, hard) = nofile::get()?;
    Ok(FdLimit {
        soft,
        hard,
        raised_from: None,
    })
}

/// Raises the soft limit to the hard one (see [`nofile::raise_to_hard`]).
pub fn raise() -> std::io::Result<FdLimit> {
    let ((before, _), (soft, hard)) = nofile::raise_to_hard()?;
    Ok(FdLimit {
        soft,
        hard,
        raised_from: (soft > before).then_some(before),
    })
}

/// Logs the limit, raised if it can be, and warns when `max_connections` does not fit in it.
pub fn raise_and_report(max_connections: usize) {
    match raise() {
        Ok(limit) => {
            tracing::info!(
                soft = limit.soft,
                hard = limit.hard,
                raised_from = limit.raised_from,
                connections = limit.connections(),
                "open-file limit"
            );
            if let Some(warning) = limit.warning(max_connections) {
                tracing::warn!("{warning}");
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot read or raise the open-file limit"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_that_do_not_fit_are_warned_about() {
        let limit = FdLimit {
            soft: 20_000,
            hard: 20_000,
            raised_from: Some(1024),
        };
        assert_eq!(limit.connections(), 20_000 - RESERVED);
        assert_eq!(limit.warning(19_000), None);
        assert_eq!(limit.warning(19_744), None, "exactly what fits");
        let warning = limit.warning(50_000).expect("50,000 do not fit in 20,000");
        assert!(
            warning.starts_with("server.max_connections: 50000 connections asked for")
                && warning.contains("20000 soft, 20000 hard")
                && warning.contains("room for about 19744"),
            "{warning}"
        );
        let tiny = FdLimit {
            soft: 100,
            hard: 100,
            raised_from: None,
        };
        assert_eq!(tiny.connections(), 0);
        assert!(tiny.warning(1).is_some());
    }

    #[test]
    fn raising_reaches_the_hard_limit() {
        let raised = raise().unwrap();
        assert!(raised.soft <= raised.hard);
        let now = current().unwrap();
        assert_eq!(now.soft, raised.soft);
        // Where the hard limit is one the kernel grants, the soft limit is it.
        if raised.hard <= 1 << 20 {
            assert_eq!(raised.soft, raised.hard);
        }
    }
}
