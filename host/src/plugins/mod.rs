//! Plugins: loaded from files named in `conductor.toml` — WebAssembly components ([`wasm`]) or
//! native libraries ([`native`]) — checked against their grants, run as pools of instances, and
//! reachable by the broker only as a [`Source`](crate::routes::Source).
//!
//! A plugin's life: its file is read and checked ([`PluginFile`], in `file`), instances are made
//! (`init`, by its [`Runtime`]), [`PluginSource::start`] runs its once-only work and starts
//! delivering host events (`dispatch`), and [`PluginSource::stop`] stops every task it started
//! ([`Tasks`]) and waits for them.
//!
//! - `runtime`: what runs a plugin ([`Runtime`]), why a call failed ([`CallError`]), why a plugin
//!   did not load ([`LoadError`]);
//! - `file`: a plugin file read, described and checked;
//! - [`capabilities`]: the host capabilities, one room per `conductor:plugin/*` interface;
//! - [`wasm`], [`native`]: the two runtimes, and `pool`: their pools of instances;
//! - `calls`: calls into a plugin, counted; `requests`: agents' requests, batched when they wait
//!   together; `dispatch` and `lanes`: its host events delivered;
//! - `source`: a loaded plugin's lifecycle and its [`Source`](crate::routes::Source) impl;
//!   `views`: what the inspector reads of it; `running`: what runs now;
//! - [`routing`]: the sources a plugin sends, checked against the routes; [`stats`]: its calls'
//!   stats; `tasks`: its background tasks.

mod calls;
pub mod capabilities;
mod dispatch;
mod file;
mod lanes;
pub mod native;
mod pool;
pub(crate) mod requests;
pub mod routing;
mod running;
mod runtime;
mod source;
pub mod stats;
mod tasks;
mod views;
pub mod wasm;

pub use capabilities::{Backends, KvStore, Mode, grants};
pub use file::{PluginFile, check};
pub use running::{PulledArtifact, Running};
pub use runtime::{CallError, LoadError, Runtime, Wait};
pub use source::{HostContext, PluginSource};
pub use tasks::Tasks;
