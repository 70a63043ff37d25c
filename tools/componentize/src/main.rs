//! `componentize IN.wasm OUT.wasm`: wrap a core module (built for wasm32-unknown-unknown with
//! wit-bindgen, which embeds the world in a custom section) into a component. The result
//! imports exactly what the world imports, nothing from WASI.

use anyhow::{Context, Result, bail};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else {
        bail!("usage: componentize IN.wasm OUT.wasm");
    };
    let module = std::fs::read(input).with_context(|| format!("reading {input}"))?;
    let component = wit_component::ComponentEncoder::default()
        .module(&module)
        .with_context(|| format!("{input}: not a core module with an embedded WIT world"))?
        .validate(true)
        .encode()
        .with_context(|| format!("{input}: could not make a component"))?;
    std::fs::write(output, &component).with_context(|| format!("writing {output}"))?;
    println!("{output}: {} bytes", component.len());
    Ok(())
}
