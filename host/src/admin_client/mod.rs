//! The client behind `conductor inspect` and `conductor reload`: one request to a running
//! conductor's admin endpoint ([`client`]), and its answers as text tables for people
//! ([`table`]). The answers' shapes are [`crate::admin::views`].

pub mod client;
pub mod table;
