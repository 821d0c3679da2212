//! The open-file limit of the tool itself: every agent is a socket, so the soft limit is raised to
//! the hard one (each process may hold about that many agents).

use anyhow::{Result, bail};

/// Descriptors kept for what is not an agent: the hub's connections, the runtime's own, stdio.
pub const RESERVED: u64 = 64;

#[path = "../../host/src/fd_limit/nofile.rs"]
mod nofile;

/// Raises the soft limit to the hard one (when the kernel grants it) and returns the soft limit.
pub fn raise() -> std::io::Result<u64> {
    Ok(nofile::raise_to_hard()?.1.0)
}

/// Fails, saying why, when `agents` connections do not fit in one process's `limit`.
pub fn check(agents: usize, processes: usize, limit: u64) -> Result<()> {
    let per_process = agents.div_ceil(processes.max(1)) as u64;
    let room = limit.saturating_sub(RESERVED);
    if per_process > room {
        bail!(
            "{per_process} agents in one process do not fit in its open-file limit ({limit}: room for {room}); spread them over more processes (--processes {})",
            (agents as u64).div_ceil(room.max(1))
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn agents_that_do_not_fit_ask_for_more_processes() {
        assert!(super::check(19_000, 1, 20_000).is_ok());
        let e = super::check(100_000, 1, 20_000).unwrap_err().to_string();
        assert!(e.contains("(--processes 6)"), "{e}");
        assert!(super::check(100_000, 6, 20_000).is_ok());
        assert!(super::raise().unwrap() > 0);
    }
}
