//! The manual (docs/*.md, generated pages included) says what is true now, in pages short enough to read: no page
//! reaches 15 KB, and none names an issue, a date or a pass of work. History goes to bench/README.md and git.

use std::path::Path;

const MAX_PAGE: usize = 15 * 1024;

/// MCP revisions are named by dates: these are names, not history (`awt_llm::mcp::REVISIONS`, and the draft the
/// MCP page says is not implemented).
fn is_mcp_revision(date: &str) -> bool {
    awt_llm::mcp::REVISIONS.contains(&date) || date == "2026-07-28"
}

/// What in `text` reads as history: an issue number (`issue 38`, `issues 20 and 24`, `#41`), a date
/// (`2026-12-05`), or a pass or wave of work. Each finding with its line number.
fn history(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let lower = line.to_lowercase();
        let b = lower.as_bytes();
        let word_start = |i: usize| i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
        for (i, _) in lower.match_indices("issue") {
            let mut j = i + "issue".len();
            if b.get(j) == Some(&b's') {
                j += 1;
            }
            while matches!(b.get(j), Some(b' ' | b'#')) {
                j += 1;
            }
            if word_start(i) && digit(j) {
                found.push((n + 1, format!("an issue number: {line}")));
            }
        }
        for (i, _) in lower.match_indices('#') {
            if word_start(i) && digit(i + 1) {
                found.push((n + 1, format!("an issue number: {line}")));
            }
        }
        for i in 0..b.len().saturating_sub(9) {
            let shape = (0..10).all(|k| {
                if k == 4 || k == 7 {
                    b[i + k] == b'-'
                } else {
                    digit(i + k)
                }
            });
            let ends = b.get(i + 10).is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_'));
            if shape && b[i..].starts_with(b"20") && word_start(i) && ends && !is_mcp_revision(&lower[i..i + 10]) {
                found.push((n + 1, format!("a date: {line}")));
            }
        }
        for phrase in ["this pass", "this wave", "last pass", "next pass"] {
            if lower.contains(phrase) {
                found.push((n + 1, format!("{phrase:?}: {line}")));
            }
        }
    }
    found
}

#[test]
fn every_manual_page_is_short_and_says_what_is_true_now() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let mut pages: Vec<_> = std::fs::read_dir(&docs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    assert!(pages.len() >= 10, "only {} pages in docs/", pages.len());
    let mut wrong = Vec::new();
    for page in &pages {
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(page).unwrap();
        if text.len() >= MAX_PAGE {
            wrong.push(format!(
                "docs/{name} is {} bytes (a page stays under {MAX_PAGE}): split it where its subject is two, or move history to bench/README.md",
                text.len()
            ));
        }
        for (line, what) in history(&text) {
            wrong.push(format!("docs/{name}:{line}: {what}"));
        }
    }
    assert!(wrong.is_empty(), "the manual:\n{}", wrong.join("\n"));
}

#[test]
fn the_history_finder_finds_issue_numbers_dates_and_passes_and_spares_the_rest() {
    for bad in [
        "as issue 38 asked",
        "## What is confined (Issue 20)",
        "issues 20 and 24",
        "see #41",
        "(since 2026-12-05)",
        "after this pass was merged",
    ] {
        assert!(!history(bad).is_empty(), "{bad:?} not found");
    }
    for good in [
        "MCP 2025-11-25 and 2024-11-05",
        "JSON Schema 2020-12",
        "\"createdAt\": \"2026-12-01T22:59:59.123Z\"",
        "[the deny list](#the-deny-list)",
        "the issue is the tool's",
        "a passing call",
        "v4 #[cfg]",
    ] {
        assert!(history(good).is_empty(), "{good:?}: {:?}", history(good));
    }
}
