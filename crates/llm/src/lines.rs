//! Bounded line reading for the long-lived modes (`mcp`, `use-tool --serve`): a line longer than the bound is
//! skipped to its end without being kept, so a client's endless line costs at most the bound in memory.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest request line a long-lived mode reads (16 MiB); a longer one gets an error answer.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// One line read by [`next`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// The line's bytes, without its newline (not checked for UTF-8).
    Bytes(Vec<u8>),
    /// A line over the bound: how many bytes it had (it was read to its end and dropped).
    TooLong(u64),
}

/// The next line of `r`, or `None` at the end of input. A last line without a newline counts.
pub async fn next<R: AsyncBufRead + Unpin>(r: &mut R, max: usize) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut seen: u64 = 0;
    let mut over = false;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(match (seen, over) {
                (0, _) => None,
                (n, true) => Some(Line::TooLong(n)),
                _ => Some(Line::Bytes(line)),
            });
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        seen += chunk.len() as u64;
        if !over && line.len() + chunk.len() > max {
            over = true;
            line = Vec::new();
        }
        if !over {
            line.extend_from_slice(chunk);
        }
        let used = done.unwrap_or(buf.len());
        r.consume(used);
        if done.is_some() {
            return Ok(Some(if over { Line::TooLong(seen) } else { Line::Bytes(line) }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_within_and_over_the_bound() {
        let input: &[u8] = b"abc\n0123456789\nxy\nlast";
        let mut r = tokio::io::BufReader::with_capacity(4, input);
        assert_eq!(next(&mut r, 5).await.unwrap(), Some(Line::Bytes(b"abc".to_vec())));
        assert_eq!(next(&mut r, 5).await.unwrap(), Some(Line::TooLong(10)));
        assert_eq!(next(&mut r, 5).await.unwrap(), Some(Line::Bytes(b"xy".to_vec())));
        assert_eq!(next(&mut r, 5).await.unwrap(), Some(Line::Bytes(b"last".to_vec())));
        assert_eq!(next(&mut r, 5).await.unwrap(), None);
    }
}
