//! The coercions AnimaWorks' `permissions.json` loader (pydantic 2, lax mode) applies to booleans and integers,
//! exactly — no more, so that a file means the same to both runners, and a value pydantic refuses refuses the
//! whole file here too (fail closed).
//!
//! - a boolean: `true`/`false`; the numbers 0 and 1 (also `0.0`, `1.0`); the strings `0 off f false n no` and
//!   `1 on t true y yes`, in any case, with no surrounding space;
//! - an integer: an integer; a number with no fraction (`1.0`); `true`/`false` (1/0); a string that, trimmed of
//!   white space, is an optional sign and digits, `_` allowed between two digits, optionally followed by `.` and
//!   zeros (`" +1_000 "`, `"1.00"`).

use serde::de::{self, Deserializer, Unexpected, Visitor};
use std::fmt;

/// A boolean as pydantic's lax mode reads it.
pub fn bool_from_str(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "1" | "on" | "t" | "true" | "y" | "yes" => Some(true),
        "0" | "off" | "f" | "false" | "n" | "no" => Some(false),
        _ => None,
    }
}

/// An integer as pydantic's lax mode reads it from a string.
pub fn int_from_str(s: &str) -> Option<i128> {
    let t = s.trim();
    let (neg, body) = match t.as_bytes().first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (body, None),
    };
    if frac.is_some_and(|f| f.is_empty() || !f.bytes().all(|b| b == b'0')) {
        return None;
    }
    let b = int.as_bytes();
    let digits_ok = !b.is_empty()
        && b[0].is_ascii_digit()
        && b[b.len() - 1].is_ascii_digit()
        && b.iter().all(|c| c.is_ascii_digit() || *c == b'_')
        && !int.contains("__");
    if !digits_ok {
        return None;
    }
    let n: i128 = int.replace('_', "").parse().ok()?;
    Some(if neg { -n } else { n })
}

struct LaxBool;

impl Visitor<'_> for LaxBool {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a boolean (true/false, 0/1, or one of the words yes/no, on/off, y/n, t/f, true/false)")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        Ok(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        match v {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(E::invalid_value(Unexpected::Unsigned(v), &self)),
        }
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        match v {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(E::invalid_value(Unexpected::Signed(v), &self)),
        }
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<bool, E> {
        if v == 0.0 {
            Ok(false)
        } else if v == 1.0 {
            Ok(true)
        } else {
            Err(E::invalid_value(Unexpected::Float(v), &self))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        bool_from_str(v).ok_or_else(|| E::invalid_value(Unexpected::Str(v), &self))
    }
}

struct LaxInt;

impl Visitor<'_> for LaxInt {
    type Value = i128;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<i128, E> {
        Ok(i128::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i128, E> {
        Ok(i128::from(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i128, E> {
        Ok(i128::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i128, E> {
        if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e38 {
            Ok(v as i128)
        } else {
            Err(E::invalid_value(Unexpected::Float(v), &self))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<i128, E> {
        int_from_str(v).ok_or_else(|| E::invalid_value(Unexpected::Str(v), &self))
    }
}

/// `#[serde(deserialize_with = "lax::boolean")]`
pub fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    d.deserialize_any(LaxBool)
}

/// `#[serde(deserialize_with = "lax::integer")]`
pub fn integer<'de, D: Deserializer<'de>>(d: D) -> Result<i128, D::Error> {
    d.deserialize_any(LaxInt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b(v: serde_json::Value) -> Option<bool> {
        boolean(v).ok()
    }
    fn i(v: serde_json::Value) -> Option<i128> {
        integer(v).ok()
    }

    /// The table was read off pydantic 2 (AnimaWorks 0.15's dependency); runner/tests/it/dropin.rs compares
    /// with the original itself when it is installed.
    #[test]
    fn booleans_as_pydantic_reads_them() {
        for (v, want) in [
            (json!(true), Some(true)),
            (json!(0), Some(false)),
            (json!(1), Some(true)),
            (json!(1.0), Some(true)),
            (json!(0.0), Some(false)),
            (json!(2), None),
            (json!(-1), None),
            (json!(1.5), None),
            (json!("YES"), Some(true)),
            (json!("tRuE"), Some(true)),
            (json!("off"), Some(false)),
            (json!("n"), Some(false)),
            (json!(" yes"), None),
            (json!("1 "), None),
            (json!("01"), None),
            (json!(""), None),
            (json!("1.0"), None),
            (json!(null), None),
            (json!([]), None),
            (json!({}), None),
        ] {
            assert_eq!(b(v.clone()), want, "{v}");
        }
    }

    #[test]
    fn integers_as_pydantic_reads_them() {
        for (v, want) in [
            (json!(true), Some(1)),
            (json!(-1), Some(-1)),
            (json!(3.0), Some(3)),
            (json!(1.5), None),
            (json!("1"), Some(1)),
            (json!(" +1_000 "), Some(1000)),
            (json!("\u{a0}1"), Some(1)),
            (json!("01"), Some(1)),
            (json!("1.00"), Some(1)),
            (json!("-1.0"), Some(-1)),
            (json!("1."), None),
            (json!(".0"), None),
            (json!("1._0"), None),
            (json!("_1"), None),
            (json!("1_"), None),
            (json!("1__0"), None),
            (json!("1e0"), None),
            (json!("0x1"), None),
            (json!("yes"), None),
            (json!(""), None),
            (json!("1.0000000001"), None),
            (json!(null), None),
        ] {
            assert_eq!(i(v.clone()), want, "{v}");
        }
    }
}
