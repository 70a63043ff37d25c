//! The WIT world's bindings, generated (wasm builds only): the one module `component`,
//! `convert` and `log` all depend on, and none of them on each other's internals.

wit_bindgen::generate!({
    path: "../../wit",
    world: "zundoko-rules",
    pub_export_macro: true,
    export_macro_name: "export_component",
    default_bindings_module: "zundoko_guest_sdk::bindings",
});
