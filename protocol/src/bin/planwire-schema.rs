//! Prints the protocol's JSON Schema. The committed copy is `protocol/schema.json`:
//! `cargo run -p planwire-protocol --bin planwire-schema > protocol/schema.json`

use std::io::Write;

fn main() {
    let text = planwire_protocol::schema::schema_json();
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        eprintln!("planwire-schema: {e}");
        std::process::exit(1);
    }
}
