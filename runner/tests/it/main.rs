//! Integration tests of the `animaworks-tool` binary and library: real processes, real files, real pipes.
//! One test binary, split into topic modules; `support` builds temporary tiers.

mod support;

mod core;
