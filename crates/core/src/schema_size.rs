//! How large a JSON Schema is once every `$ref` is replaced by the schema it names: what a validator walks.
//! Discovery refuses a schema past [`MAX_EXPANDED`], so a few kilobytes of `$defs` that each name the one before
//! twice (2^n nodes in n definitions) never reach a validator.
//!
//! A `$ref` back into its own expansion (a recursive schema) is counted once: its cost grows with the depth of
//! the value checked, not with the schema, and the call's timeout bounds it (`validate::bounded`).

use serde_json::Value;
use std::collections::HashMap;

/// The most schema nodes a schema may expand to.
pub const MAX_EXPANDED: u64 = 100_000;

/// The most levels the measure descends, each object, array and `$ref` followed counted: a bound on its own stack
/// (and on the validator's) that no real schema nears.
pub const MAX_DEPTH: usize = 512;

/// Why a schema's expansion is refused.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ExpansionError {
    #[error(
        "it expands to more than {MAX_EXPANDED} schema nodes once each $ref is replaced by what it names \
         (a validator would walk them all); name shared definitions fewer times"
    )]
    TooLarge,
    #[error("it nests more than {MAX_DEPTH} levels deep, each $ref followed counted")]
    TooDeep,
    #[error(
        "its $ref {0:?} names no place in the schema itself; the runner measures only \"#/...\" pointers, \
         \"#name\" anchors and declared $ids"
    )]
    Unmeasured(String),
}

/// The number of nodes `schema` expands to, at most [`MAX_EXPANDED`].
pub fn expanded_size(schema: &Value) -> Result<u64, ExpansionError> {
    let mut index = Index::default();
    index.scan(schema, schema);
    let mut m = Measure {
        index,
        root: schema,
        sizes: HashMap::new(),
        stack: Vec::new(),
        depth: 0,
    };
    m.size(schema, schema)
}

/// Where `$ref`s can lead: every resource (`$id`), anchor, and the resource each object belongs to.
#[derive(Default)]
struct Index<'a> {
    ids: Vec<(&'a str, &'a Value)>,
    anchors: Vec<(&'a str, &'a Value)>,
    base_of: HashMap<*const Value, &'a Value>,
}

fn id_of(v: &Value) -> Option<&str> {
    let m = v.as_object()?;
    m.get("$id").or_else(|| m.get("id")).and_then(Value::as_str)
}

/// Keywords whose values are data, not schemas: a `$ref` key inside them is not a reference.
fn is_data(key: &str) -> bool {
    matches!(key, "enum" | "const" | "examples" | "default")
}

impl<'a> Index<'a> {
    fn scan(&mut self, v: &'a Value, base: &'a Value) {
        match v {
            Value::Object(m) => {
                let base = match id_of(v) {
                    Some(id) => {
                        self.ids.push((id.trim_end_matches('#'), v));
                        v
                    }
                    None => base,
                };
                self.base_of.insert(v as *const Value, base);
                for k in ["$anchor", "$dynamicAnchor", "$recursiveAnchor"] {
                    if let Some(a) = m.get(k).and_then(Value::as_str) {
                        self.anchors.push((a, v));
                    }
                }
                for (k, x) in m {
                    if !is_data(k) {
                        self.scan(x, base);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| self.scan(x, base)),
            _ => {}
        }
    }
}

struct Measure<'a> {
    index: Index<'a>,
    root: &'a Value,
    sizes: HashMap<*const Value, u64>,
    stack: Vec<*const Value>,
    depth: usize,
}

fn over(n: u64) -> Result<u64, ExpansionError> {
    if n > MAX_EXPANDED {
        Err(ExpansionError::TooLarge)
    } else {
        Ok(n)
    }
}

impl<'a> Measure<'a> {
    fn size(&mut self, v: &'a Value, base: &'a Value) -> Result<u64, ExpansionError> {
        let key = v as *const Value;
        if let Some(n) = self.sizes.get(&key) {
            return Ok(*n);
        }
        if self.depth >= MAX_DEPTH {
            return Err(ExpansionError::TooDeep);
        }
        self.depth += 1;
        let n = self.measure(v, base);
        self.depth -= 1;
        let n = n?;
        self.sizes.insert(key, n);
        Ok(n)
    }

    fn measure(&mut self, v: &'a Value, base: &'a Value) -> Result<u64, ExpansionError> {
        Ok(match v {
            Value::Object(m) => {
                let base = if id_of(v).is_some() { v } else { base };
                let mut n = 1u64;
                for (k, x) in m {
                    n += match (k.as_str(), x) {
                        (k, _) if is_data(k) => 1,
                        ("$ref" | "$dynamicRef" | "$recursiveRef", Value::String(r)) => self.through(r, base)?,
                        _ => self.size(x, base)?,
                    };
                    over(n)?;
                }
                n
            }
            Value::Array(a) => {
                let mut n = 1u64;
                for x in a {
                    n += self.size(x, base)?;
                    over(n)?;
                }
                n
            }
            _ => 1,
        })
    }

    /// The size of what `r` names: the largest of its candidates (an anchor may be declared more than once).
    fn through(&mut self, r: &str, base: &'a Value) -> Result<u64, ExpansionError> {
        let targets = self.resolve(r, base);
        if targets.is_empty() {
            return Err(ExpansionError::Unmeasured(r.to_owned()));
        }
        let mut most = 0;
        for t in targets {
            let key = t as *const Value;
            if self.stack.contains(&key) {
                most = most.max(1);
                continue;
            }
            self.stack.push(key);
            let tb = self.index.base_of.get(&key).copied().unwrap_or(self.root);
            let n = self.size(t, tb);
            self.stack.pop();
            most = most.max(n?);
        }
        Ok(most)
    }

    fn resolve(&self, r: &str, base: &'a Value) -> Vec<&'a Value> {
        let (resource, fragment) = r.split_once('#').unwrap_or((r, ""));
        let bases: Vec<&'a Value> = if resource.is_empty() {
            vec![base, self.root]
        } else {
            self.index
                .ids
                .iter()
                .filter(|(id, _)| *id == resource || id.ends_with(&format!("/{resource}")))
                .map(|(_, v)| *v)
                .collect()
        };
        let fragment = awt_sys::percent::decode(fragment);
        let mut found: Vec<&'a Value> = Vec::new();
        for b in bases {
            let hit: Vec<&'a Value> = if fragment.is_empty() {
                vec![b]
            } else if fragment.starts_with('/') {
                b.pointer(&fragment).into_iter().collect()
            } else {
                self.index
                    .anchors
                    .iter()
                    .filter(|(a, _)| *a == fragment)
                    .map(|(_, v)| *v)
                    .collect()
            };
            for h in hit {
                if !found.iter().any(|f| std::ptr::eq(*f, h)) {
                    found.push(h);
                }
            }
        }
        found
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `d_i = allOf[$ref d_{i-1}, $ref d_{i-1}]`: 2^i nodes in i definitions.
    pub(crate) fn doubling(levels: usize) -> Value {
        let mut defs = serde_json::Map::new();
        defs.insert("d0".into(), json!({"type": "string"}));
        for i in 1..=levels {
            let r = format!("#/$defs/d{}", i - 1);
            defs.insert(format!("d{i}"), json!({"allOf": [{"$ref": r}, {"$ref": r}]}));
        }
        let top = format!("#/$defs/d{levels}");
        json!({"type": "object", "properties": {"x": {"$ref": top}}, "$defs": defs})
    }

    #[test]
    fn doubling_definitions_are_refused() {
        assert!(expanded_size(&doubling(8)).unwrap() < 5_000);
        assert_eq!(expanded_size(&doubling(59)), Err(ExpansionError::TooLarge));
    }

    #[test]
    fn usual_schemas_measure() {
        let pydantic = json!({
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"items": {"$ref": "#/$defs/A"}}},
            "$defs": {"A": {"type": "object", "properties": {"n": {"type": "integer"}}}, "a b": {"type": "string"}},
            "required": ["a"],
        });
        assert!(expanded_size(&pydantic).is_ok());
        let recursive = json!({"type": "object", "properties": {"kids": {"items": {"$ref": "#"}}}});
        assert!(expanded_size(&recursive).is_ok());
        let anchored = json!({"$defs": {"x": {"$anchor": "x", "type": "string"}}, "$ref": "#x"});
        assert!(expanded_size(&anchored).is_ok());
        let escaped = json!({"$defs": {"a b": {"type": "string"}}, "$ref": "#/$defs/a%20b"});
        assert!(expanded_size(&escaped).is_ok());
        let by_id = json!({"$defs": {"x": {"$id": "https://e.test/x", "type": "string"}}, "$ref": "https://e.test/x"});
        assert!(expanded_size(&by_id).is_ok());
        let data = json!({"enum": [{"$ref": "nowhere"}]});
        assert!(expanded_size(&data).is_ok());
    }

    #[test]
    fn refs_it_cannot_follow_are_refused() {
        let r = expanded_size(&json!({"$ref": "https://elsewhere.test/s.json"}));
        assert!(matches!(r, Err(ExpansionError::Unmeasured(_))), "{r:?}");
        // The outermost first, so no definition was measured before the chain is followed.
        let mut defs = serde_json::Map::new();
        for i in (1..=600).rev() {
            defs.insert(format!("c{i}"), json!({"$ref": format!("#/$defs/c{}", i - 1)}));
        }
        defs.insert("c0".into(), json!({"type": "string"}));
        let chain = json!({"$ref": "#/$defs/c600", "$defs": defs});
        assert_eq!(expanded_size(&chain), Err(ExpansionError::TooDeep));
    }
}
