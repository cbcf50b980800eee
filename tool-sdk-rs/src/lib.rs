// Why the link definitions first: README.md ends with links to source files (so it renders on a code host);
// in Markdown the first definition of a label wins, so rustdoc uses these intra-doc links instead.
#![cfg_attr(
    feature = "sdk",
    doc = "[`protocol`]: crate::protocol\n[`Action::new`]: crate::Action::new\n[`NoArgs`]: crate::NoArgs\n\
           [`Action::with_input_schema`]: crate::Action::with_input_schema\n[`Tool::credential`]: crate::Tool::credential\n\
           [`Tool::broker`]: crate::Tool::broker\n[`get_credential`]: crate::get_credential\n\
           [`Credential::new`]: crate::Credential::new\n[`Tool::check`]: crate::Tool::check\n[`Context`]: crate::Context\n\
           [`ToolError`]: crate::ToolError\n[`testing`]: crate::testing\n"
)]
#![cfg_attr(feature = "sdk", doc = include_str!("../README.md"))]
#![cfg_attr(
    not(feature = "sdk"),
    doc = "The wire types of the animaworks-tool protocol, in [`protocol`]. Enable the `sdk` feature for the tool SDK."
)]
// Why not `forbid`: adopting the broker's inherited descriptor (credential.rs) is the one unsafe operation an
// SDK cannot avoid (a number from the environment becomes an owned descriptor); nothing else is unsafe.
#![deny(unsafe_code)]

/// The wire types (the `animaworks-tool-protocol` crate, which the runner uses too).
pub use awt_protocol as protocol;
pub use awt_protocol::names;

#[cfg(feature = "sdk")]
#[warn(missing_docs)]
mod context;
#[cfg(all(feature = "sdk", unix))]
#[warn(missing_docs)]
mod credential;
#[cfg(feature = "sdk")]
#[warn(missing_docs)]
mod error;
#[cfg(feature = "sdk")]
#[warn(missing_docs)]
mod serve;
#[cfg(feature = "sdk")]
#[warn(missing_docs)]
pub mod testing;
#[cfg(feature = "sdk")]
#[warn(missing_docs)]
mod tool;

#[cfg(feature = "sdk")]
pub use context::Context;
#[cfg(all(feature = "sdk", unix))]
pub use credential::{get_credential, CredentialQuery, BROKER_FD_VAR, MISSING_CREDENTIAL};
#[cfg(feature = "sdk")]
pub use error::ToolError;
#[cfg(feature = "sdk")]
pub use protocol::{Annotations, CredentialDecl as Credential, Hints, Level, Net, Sandbox};
#[cfg(feature = "sdk")]
pub use schemars::{self, JsonSchema};
#[cfg(feature = "sdk")]
pub use tool::{input_schema_for, Action, NoArgs, Tool};
