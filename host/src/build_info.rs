//! What the running binary is: its version, the plugin contract it serves and the commit it is
//! built from (`conductor --version`, `conductor_build_info`).

use std::sync::LazyLock;

/// The workspace's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The plugin contract (`conductor:plugin@…`) plugins are built against.
pub const CONTRACT: &str = conductor_plugin_sdk::SDK_VERSION;
/// The commit (`git rev-parse HEAD` at build time, the image build's `REVISION`, or `unknown`).
pub const COMMIT: &str = env!("CONDUCTOR_COMMIT");

/// `conductor --version` after the name: `0.1.0 (plugin contract 0.6.4, commit 0123456789ab)`.
pub fn version_line() -> &'static str {
    static LINE: LazyLock<String> = LazyLock::new(|| {
        let commit = COMMIT.get(..12).unwrap_or(COMMIT);
        format!("{VERSION} (plugin contract {CONTRACT}, commit {commit})")
    });
    &LINE
}
