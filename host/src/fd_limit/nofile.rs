//! `RLIMIT_NOFILE` read and raised, in plain `libc` (the load tool compiles this file too).

/// The (soft, hard) open-file limit.
pub fn get() -> std::io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for the call to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((limit.rlim_cur, limit.rlim_max))
}

/// Raises the soft limit to the hard one; returns the (soft, hard) limit before and after. A
/// hard limit the kernel will not grant as a soft one (unlimited, above `fs.nr_open`) leaves the
/// soft limit where it was.
pub fn raise_to_hard() -> std::io::Result<((u64, u64), (u64, u64))> {
    let before = get()?;
    if before.0 < before.1 {
        let raised = libc::rlimit {
            rlim_cur: before.1,
            rlim_max: before.1,
        };
        // SAFETY: `raised` is a valid rlimit; the call only reads it. A refusal leaves the limit
        // as it was, which is read back below.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
    }
    Ok((before, get()?))
}
