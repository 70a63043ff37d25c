//! Compiled modules kept on disk (`--cache-dir DIR`, in `DIR/compiled/`): a restarted operator
//! loads the machine code it compiled before instead of compiling the module again. Keyed by
//! the module's digest and the engine's compatibility hash (wasmtime's own: its version and
//! every setting that changes compiled code); wasmtime checks that again when it loads a file,
//! and a file whose checksum does not match what was written is dropped and compiled anew. The
//! directory is the operator's own (an emptyDir): what it holds is loaded as code.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

pub struct CompiledCache {
    /// The directory `--cache-dir` named (the compiler process is handed this one).
    root: PathBuf,
    dir: PathBuf,
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl CompiledCache {
    pub fn open(root: &Path) -> Result<Self, String> {
        let dir = root.join("compiled");
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create the compiled module cache {}: {e}", dir.display()))?;
        Ok(CompiledCache { root: root.to_path_buf(), dir })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, engine: &Engine, bytes: &[u8]) -> PathBuf {
        let mut compat = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut compat);
        self.dir.join(format!("{}-{:016x}.cwasm", sha256_hex(bytes), compat.finish()))
    }

    /// The module's compiled code, if a compatible, intact copy is kept.
    pub fn lookup(&self, engine: &Engine, bytes: &[u8]) -> Option<Component> {
        self.read(engine, &self.path(engine, bytes))
    }

    /// Compile the module and keep its code (what the compiler process does).
    pub fn compile_into(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<()> {
        let compiled = engine.precompile_component(bytes)?;
        self.write(&self.path(engine, bytes), &compiled);
        Ok(())
    }

    /// The module compiled: from the cache if a compatible, intact copy is there, else
    /// compiled now and kept.
    pub fn component(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<(Component, bool)> {
        let path = self.path(engine, bytes);
        if let Some(component) = self.read(engine, &path) {
            return Ok((component, true));
        }
        let compiled = engine.precompile_component(bytes)?;
        self.write(&path, &compiled);
        // SAFETY: the bytes are what this engine's `precompile_component` just returned.
        let component = unsafe { Component::deserialize(engine, &compiled)? };
        Ok((component, false))
    }

    fn read(&self, engine: &Engine, path: &Path) -> Option<Component> {
        // Hashed as it streams by, then mapped rather than read into memory: a big module's
        // code (35 MiB for a CPython component) is page cache, not the operator's heap.
        let mut hasher = Sha256::new();
        std::io::copy(&mut std::fs::File::open(path).ok()?, &mut hasher).ok()?;
        let written = std::fs::read_to_string(path.with_extension("sha256")).unwrap_or_default();
        if written.trim() != hex::encode(hasher.finalize()) {
            tracing::warn!(path = %path.display(), "a compiled module in the cache does not match its checksum; compiling again");
            self.drop_entry(path);
            return None;
        }
        // SAFETY: written by this process or an earlier one from `precompile_component` into
        // the operator's own directory, intact (checksum); wasmtime refuses it if it was made by
        // another version or with other settings.
        match unsafe { Component::deserialize_file(engine, path) } {
            Ok(component) => Some(component),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "a compiled module in the cache does not fit this engine; compiling again");
                self.drop_entry(path);
                None
            }
        }
    }

    /// Through a temporary file and a rename, the checksum last: a reader finds a whole file
    /// and its checksum, or a file without one (dropped).
    fn write(&self, path: &Path, code: &[u8]) {
        let put = |target: &Path, bytes: &[u8]| -> std::io::Result<()> {
            let tmp = target.with_extension(format!("tmp-{}", std::process::id()));
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            std::fs::rename(&tmp, target)
        };
        if let Err(error) = put(path, code).and_then(|()| put(&path.with_extension("sha256"), sha256_hex(code).as_bytes())) {
            tracing::warn!(path = %path.display(), %error, "could not keep a compiled module in the cache");
        }
    }

    fn drop_entry(&self, path: &Path) {
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_file(path.with_extension("sha256"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component the engine accepts (the shipped module, when built; else a minimal one).
    fn component_bytes() -> Vec<u8> {
        let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/modules/zundoko-classic.wasm");
        std::fs::read(built).unwrap_or_else(|_| wat::parse_str("(component (core module))").unwrap())
    }

    #[test]
    fn a_module_compiled_once_is_loaded_from_disk_and_a_damaged_copy_is_compiled_again() {
        let dir = std::env::temp_dir().join(format!("zundoko-compiled-{}", std::process::id()));
        let engine = Engine::default();
        let bytes = component_bytes();
        let cache = CompiledCache::open(&dir).unwrap();
        assert!(!cache.component(&engine, &bytes).unwrap().1, "compiled the first time");
        let files = || std::fs::read_dir(dir.join("compiled")).unwrap().map(|e| e.unwrap().path()).collect::<Vec<_>>();
        assert_eq!(files().len(), 2, "the code and its checksum: {:?}", files());
        assert!(CompiledCache::open(&dir).unwrap().component(&engine, &bytes).unwrap().1, "loaded the second time");
        // Damaged on disk: not loaded, compiled again and kept again.
        let code = files().into_iter().find(|p| p.extension().is_some_and(|e| e == "cwasm")).unwrap();
        let mut damaged = std::fs::read(&code).unwrap();
        let mid = damaged.len() / 2;
        damaged[mid] ^= 0xff;
        std::fs::write(&code, damaged).unwrap();
        assert!(!cache.component(&engine, &bytes).unwrap().1, "a damaged copy is compiled again");
        assert!(cache.component(&engine, &bytes).unwrap().1);
        // Another engine configuration: its own entry.
        let mut config = wasmtime::Config::new();
        config.consume_fuel(true);
        let other = Engine::new(&config).unwrap();
        assert!(!cache.component(&other, &bytes).unwrap().1, "compiled for the other settings");
        assert_eq!(files().len(), 4);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
