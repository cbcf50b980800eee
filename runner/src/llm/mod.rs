//! LLMs as callers: AnimaWorks' `use_tool` ([`use_tool`]), provider function-calling schemas ([`providers`]) and an
//! MCP server ([`mcp`]). All three list what [`catalog`] finds and call through the same
//! resolve → validate → permit → run path as the CLI.

pub mod background;
pub mod catalog;
pub mod mcp;
pub mod providers;
pub mod use_tool;
