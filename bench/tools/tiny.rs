//! A minimal compiled tool for the policy benchmark. Its `--schemas` answer is fixed at compile time
//! (`TINY_SCHEMAS='…' rustc -O tiny.rs`), so two builds differ only in what they declare. A call reads the
//! request and answers whether `DEMO_TOKEN` reached it (never the value).
use std::io::{Read, Write};

fn main() {
    if std::env::args().nth(1).as_deref() == Some("--schemas") {
        println!("{}", option_env!("TINY_SCHEMAS").unwrap_or(r#"{"protocol":1,"actions":[{"name":"go"}]}"#));
        return;
    }
    let mut req = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut req);
    let has = std::env::var_os("DEMO_TOKEN").is_some_and(|v| !v.is_empty());
    let _ = writeln!(std::io::stdout(), "{{\"ok\":true,\"has_secret\":{has}}}");
}
