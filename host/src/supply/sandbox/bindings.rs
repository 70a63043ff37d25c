//! Host bindings for the WIT world `zundokokiyoshi:rules/zundoko-rules`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "zundoko-rules",
});

/// The interface a module must export, with its version: what `check` prints and what a
/// mismatch names.
pub const RULES_EXPORT: &str = "zundokokiyoshi:rules/rules@0.1.0";
/// The world this host implements.
pub const WORLD: &str = "zundokokiyoshi:rules/zundoko-rules@0.1.0";
/// The only imports a module may have: the log function and the (function-free) types.
pub const ALLOWED_IMPORTS: [&str; 2] = [
    "zundokokiyoshi:rules/log@0.1.0",
    "zundokokiyoshi:rules/types@0.1.0",
];
