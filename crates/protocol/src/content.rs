//! Content blocks beside a result (protocol.md §5.2): MCP's `text`, `image`, `audio`, `resource` and
//! `resource_link` blocks, as MCP defines them, carried whole so that an MCP client receives them unchanged.
//! Here: what makes a block well formed, and the short description a person sees instead of its bytes.

use serde_json::Value;

/// The block types protocol.md §5.2 carries (MCP's `ContentBlock`).
pub const TYPES: [&str; 5] = ["text", "image", "audio", "resource", "resource_link"];

/// The most blocks one result may carry.
pub const MAX_BLOCKS: usize = 1000;

fn str_of<'a>(b: &'a Value, key: &str) -> Option<&'a str> {
    b.get(key).and_then(Value::as_str)
}

/// Why `blocks` is not a list of well-formed blocks (the first fault, with its index), or `Ok`.
pub fn check(blocks: &[Value]) -> Result<(), String> {
    if blocks.len() > MAX_BLOCKS {
        return Err(format!(
            "\"content\" holds {} blocks, more than {MAX_BLOCKS}",
            blocks.len()
        ));
    }
    for (i, b) in blocks.iter().enumerate() {
        check_block(b).map_err(|why| format!("content block {i}: {why}"))?;
    }
    Ok(())
}

fn check_block(b: &Value) -> Result<(), String> {
    let Some(kind) = str_of(b, "type") else {
        return Err("not an object with a string \"type\"".into());
    };
    let need = |key: &str| -> Result<(), String> {
        match b.get(key) {
            Some(Value::String(_)) => Ok(()),
            _ => Err(format!("a \"{kind}\" block needs a string \"{key}\"")),
        }
    };
    if let Some(a) = b.get("annotations") {
        if !a.is_object() {
            return Err("\"annotations\" is not an object".into());
        }
    }
    match kind {
        "text" => need("text"),
        "image" | "audio" => {
            need("data")?;
            need("mimeType")?;
            if !is_base64(str_of(b, "data").unwrap_or_default()) {
                return Err(format!("the \"data\" of a \"{kind}\" block is not base64"));
            }
            Ok(())
        }
        "resource_link" => {
            need("uri")?;
            need("name")
        }
        "resource" => {
            let Some(r) = b.get("resource").filter(|r| r.is_object()) else {
                return Err("a \"resource\" block needs a \"resource\" object".into());
            };
            if str_of(r, "uri").is_none() {
                return Err("its \"resource\" needs a string \"uri\"".into());
            }
            match (str_of(r, "text"), str_of(r, "blob")) {
                (Some(_), None) => Ok(()),
                (None, Some(blob)) if is_base64(blob) => Ok(()),
                (None, Some(_)) => Err("its \"blob\" is not base64".into()),
                _ => Err("its \"resource\" needs either a string \"text\" or a string \"blob\"".into()),
            }
        }
        other => Err(format!("unknown block type {other:?} (one of {})", TYPES.join(", "))),
    }
}

/// Standard base64 with padding (RFC 4648 §4), as MCP's `data` and `blob` are.
fn is_base64(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() % 4 != 0 {
        return false;
    }
    let body = b.strip_suffix(b"==").or_else(|| b.strip_suffix(b"=")).unwrap_or(b);
    body.iter()
        .all(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/')
}

/// The bytes a base64 text of this length decodes to.
pub fn decoded_len(b64: &str) -> usize {
    let pad = b64.bytes().rev().take(2).filter(|c| *c == b'=').count();
    (b64.len() / 4 * 3).saturating_sub(pad)
}

/// The size of `n` bytes as a person reads it: `812 B`, `12 KB`, `3.4 MB` (1 KB = 1024 bytes).
pub fn size(n: usize) -> String {
    if n < 1024 {
        format!("{n} B")
    } else if n < 1024 * 1024 {
        format!("{} KB", n.div_ceil(1024))
    } else {
        format!("{:.1} MB", n as f64 / (1024.0 * 1024.0))
    }
}

/// A block that is not `text`, as a short line: `[image/png, 12 KB]`, `[resource_link file:///a.txt]`.
/// `None` for a text block (its text is shown as it is).
pub fn describe(b: &Value) -> Option<String> {
    let kind = str_of(b, "type")?;
    Some(match kind {
        "text" => return None,
        "image" | "audio" => format!(
            "[{}, {}]",
            str_of(b, "mimeType").unwrap_or(kind),
            size(decoded_len(str_of(b, "data").unwrap_or_default()))
        ),
        "resource" => {
            let r = b.get("resource").unwrap_or(&Value::Null);
            let uri = str_of(r, "uri").unwrap_or("?");
            let what = match (str_of(r, "text"), str_of(r, "blob")) {
                (Some(t), _) => size(t.len()),
                (_, Some(blob)) => size(decoded_len(blob)),
                _ => "empty".into(),
            };
            match str_of(r, "mimeType") {
                Some(m) => format!("[resource {uri}, {m}, {what}]"),
                None => format!("[resource {uri}, {what}]"),
            }
        }
        "resource_link" => format!("[resource_link {}]", str_of(b, "uri").unwrap_or("?")),
        other => format!("[{other}]"),
    })
}

/// The bytes of a block worth saving to a file, with a file extension: the decoded `data` of an image or audio
/// block, the `blob` or `text` of a resource. `None` for text and resource links.
pub fn payload(b: &Value) -> Option<(Vec<u8>, String)> {
    let (bytes, mime) = match str_of(b, "type")? {
        "image" | "audio" => (decode_base64(str_of(b, "data")?)?, str_of(b, "mimeType")),
        "resource" => {
            let r = b.get("resource")?;
            let bytes = match (str_of(r, "text"), str_of(r, "blob")) {
                (Some(t), _) => t.as_bytes().to_vec(),
                (_, Some(blob)) => decode_base64(blob)?,
                _ => return None,
            };
            (bytes, str_of(r, "mimeType"))
        }
        _ => return None,
    };
    Some((bytes, extension(mime.unwrap_or(""))))
}

fn extension(mime: &str) -> String {
    let sub = mime.split(['/', ';', '+']).nth(1).unwrap_or("").trim();
    match sub {
        "jpeg" => "jpg".into(),
        "plain" => "txt".into(),
        "mpeg" => "mp3".into(),
        s if !s.is_empty() && s.len() <= 10 && s.bytes().all(|c| c.is_ascii_alphanumeric()) => s.to_owned(),
        _ => "bin".into(),
    }
}

/// Standard base64 decoded, or `None` when it is not.
pub fn decode_base64(s: &str) -> Option<Vec<u8>> {
    if !is_base64(s) {
        return None;
    }
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => 0,
        }
    };
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    for q in s.as_bytes().chunks(4) {
        let n = q.iter().fold(0u32, |acc, c| (acc << 6) | val(*c));
        out.push((n >> 16) as u8);
        if q[2] != b'=' {
            out.push((n >> 8) as u8);
        }
        if q[3] != b'=' {
            out.push(n as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn well_formed_blocks_pass_and_broken_ones_say_why() {
        let good = [
            json!({"type": "text", "text": "hi", "annotations": {"audience": ["user"]}}),
            json!({"type": "image", "data": "iVBORw==", "mimeType": "image/png"}),
            json!({"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}),
            json!({"type": "resource", "resource": {"uri": "file:///a", "text": "x"}}),
            json!({"type": "resource", "resource": {"uri": "file:///a", "blob": "AA=="}}),
            json!({"type": "resource_link", "uri": "file:///a", "name": "a"}),
        ];
        assert_eq!(check(&good), Ok(()));
        for (bad, why) in [
            (json!({"type": "image", "mimeType": "image/png"}), "\"data\""),
            (
                json!({"type": "image", "data": "not base64!", "mimeType": "image/png"}),
                "not base64",
            ),
            (
                json!({"type": "image", "data": "AAA", "mimeType": "image/png"}),
                "not base64",
            ),
            (json!({"type": "video", "data": "AAAA"}), "unknown block type"),
            (json!({"type": "resource", "resource": {"uri": "u"}}), "either"),
            (json!({"type": "resource_link", "uri": "u"}), "\"name\""),
            (json!("text"), "not an object"),
            (json!({"type": "text", "text": "x", "annotations": 1}), "annotations"),
        ] {
            let e = check(&[good[0].clone(), bad.clone()]).unwrap_err();
            assert!(e.starts_with("content block 1: ") && e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn descriptions_and_payloads() {
        let data = "A".repeat(16 * 1024);
        let img = json!({"type": "image", "data": data, "mimeType": "image/png"});
        assert_eq!(describe(&img).unwrap(), "[image/png, 12 KB]");
        assert_eq!(describe(&json!({"type": "text", "text": "x"})), None);
        assert_eq!(
            describe(&json!({"type": "resource_link", "uri": "file:///a", "name": "a"})).unwrap(),
            "[resource_link file:///a]"
        );
        let (bytes, ext) = payload(&json!({"type": "image", "data": "aGk=", "mimeType": "image/png"})).unwrap();
        assert_eq!((bytes.as_slice(), ext.as_str()), (&b"hi"[..], "png"));
        assert_eq!(decode_base64("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(decoded_len("aGVsbG8="), 5);
        assert_eq!(size(500), "500 B");
    }
}
