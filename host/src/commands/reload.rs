//! `conductor reload`: asks a running conductor, through its admin endpoint, to re-read its
//! configuration (as SIGHUP does) and prints what changed, or why it was refused.

use super::{Admin, runtime};
use crate::admin_client::client;

/// `conductor reload`.
pub fn reload(admin: &Admin) -> anyhow::Result<()> {
    let body = runtime()?.block_on(client::request(&admin.endpoint(), hyper::Method::POST, "/reload"))?;
    print!("{body}");
    Ok(())
}
