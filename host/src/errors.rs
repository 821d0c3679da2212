//! Errors as one line of text, for logs, configuration errors and status messages.

/// An error with its causes, `: `-separated (a cause whose text the error already holds is not
/// repeated).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out = format!("{out}: {text}");
        }
        source = s.source();
    }
    out
}
