//! animaworks-tool SDK for Rust (placeholder: the SDK issue fills it). The wire types live in [`protocol`].
pub mod protocol;
