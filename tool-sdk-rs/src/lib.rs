#![cfg_attr(feature = "sdk", doc = include_str!("../README.md"))]
#![cfg_attr(
    not(feature = "sdk"),
    doc = "The wire types of the animaworks-tool protocol, in [`protocol`]. Enable the `sdk` feature for the tool SDK."
)]

pub mod names;
pub mod protocol;

#[cfg(feature = "sdk")]
#[warn(missing_docs)]
mod context;
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
#[cfg(feature = "sdk")]
pub use error::ToolError;
#[cfg(feature = "sdk")]
pub use protocol::{CredentialDecl as Credential, Hints, Level, Net, Sandbox};
#[cfg(feature = "sdk")]
pub use schemars::{self, JsonSchema};
#[cfg(feature = "sdk")]
pub use tool::{input_schema_for, Action, NoArgs, Tool};
