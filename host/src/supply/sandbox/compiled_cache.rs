//! Compiled modules kept on disk (`--cache-dir DIR`, in `DIR/compiled/`): a restarted operator
//! loads the machine code it compiled before instead of compiling the module again. Keyed by
//! the module's digest and the engine's compatibility hash (wasmtime's own: its version and
//! every setting that changes compiled code); wasmtime checks that again when it loads a file.
//!
//! The code is loaded as code, so it is believed only if the operator wrote it: each file ends
//! with an HMAC-SHA256, under the cache's key (`supply/disk_cache.rs`, which the compiler
//! process never sees), of the file's name and the code. A file is opened once and copied in
//! pieces into a sealed memfd, its MAC computed on the way; wasmtime gets the memfd only if the
//! MAC of what it holds verifies: what was checked is what runs. A file whose MAC does not
//! verify (damaged, another module's code under this name, written by anyone but the
//! operator) is dropped, with a warning, and compiled anew.
//!
//! wasmtime maps the checked bytes from a sealed memfd (`sealed_code.rs`), never the cache's
//! file (which anyone with the UID can write after the check): only the code's pages in use are
//! resident, not the whole copy `Component::deserialize` would make (a CPython component's code
//! is 36 MiB; the operator idled at 98.6 MiB RSS with it copied, release, warm cache).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::sealed_code;
use crate::supply::disk_cache::{DiskCache, MAC_BYTES};

/// A compiled file bigger than this is no file the operator wrote (a CPython component's code
/// is 35 MiB): dropped unread.
const MAX_FILE_BYTES: u64 = 1 << 30;

pub struct CompiledCache {
    disk: Arc<DiskCache>,
    dir: PathBuf,
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl CompiledCache {
    pub fn open(root: &Path) -> Result<Self, String> {
        let disk = DiskCache::open(root)?;
        let dir = disk.root().join("compiled");
        crate::supply::disk_cache::create_private_dir(&dir).map_err(|e| format!("cannot create the compiled module cache {}: {e}", dir.display()))?;
        Ok(CompiledCache { disk, dir })
    }

    /// The directory (its bound, its key, what serves).
    pub fn disk(&self) -> &Arc<DiskCache> {
        &self.disk
    }

    fn path(&self, engine: &Engine, bytes: &[u8]) -> PathBuf {
        let mut compat = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut compat);
        self.dir.join(format!("{}-{:016x}.cwasm", sha256_hex(bytes), compat.finish()))
    }

    /// The module's compiled code, if a compatible copy the operator wrote is kept.
    pub fn lookup(&self, engine: &Engine, bytes: &[u8]) -> Option<Component> {
        self.read(engine, &self.path(engine, bytes))
    }

    /// The module compiled: from the cache if a compatible copy the operator wrote is there,
    /// else compiled now and kept.
    pub fn component(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<(Component, bool)> {
        let path = self.path(engine, bytes);
        if let Some(component) = self.read(engine, &path) {
            return Ok((component, true));
        }
        let compiled = engine.precompile_component(bytes)?;
        self.write(&path, &compiled);
        // SAFETY: the bytes are what this engine's `precompile_component` just returned.
        let component = unsafe { sealed_code::load(engine, &compiled)? };
        Ok((component, false))
    }

    /// The module compiled by `compile` (the compiler process, with this engine's settings),
    /// which hands its code to the sink it is given in pieces: each piece goes into a new memfd
    /// and into the cache's file as it comes, its MAC computed on the way, so the code is never
    /// whole in this process's memory. The component is mapped from the sealed memfd; the file
    /// is kept (its MAC after the code, renamed into place) only once the code loaded. `Err` is
    /// the compile's own error; the inner one, wasmtime's refusal of the code.
    pub fn compile_keep_and_load<E>(
        &self,
        engine: &Engine,
        bytes: &[u8],
        compile: impl FnOnce(&mut (dyn FnMut(&[u8]) -> std::io::Result<()> + Send)) -> Result<u64, E>,
    ) -> Result<wasmtime::Result<Component>, E> {
        let path = self.path(engine, bytes);
        let tmp = Self::tmp_path(&path);
        // The file is for the next start: if it cannot be written, the code still loads now.
        let mut file = match Self::create(&tmp) {
            Ok(file) => Some(file),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "could not keep a compiled module in the cache");
                None
            }
        };
        let mut mac = self.disk.mac_in_pieces(&Self::context(&path));
        // No memfd here (no memfd_create): the code is held in memory, as `sealed_code::load`
        // would hold it anyway.
        let mut memfd = sealed_code::memfd();
        let mut held = Vec::new();
        let compiled = compile(&mut |piece: &[u8]| {
            match memfd.as_mut() {
                Ok(memfd) => memfd.write_all(piece)?,
                Err(_) => held.extend_from_slice(piece),
            }
            mac.update(piece);
            if let Some(written) = file.as_mut()
                && let Err(error) = written.write_all(piece)
            {
                tracing::warn!(path = %path.display(), %error, "could not keep a compiled module in the cache");
                file = None;
            }
            Ok(())
        });
        if let Err(error) = compiled {
            let _ = std::fs::remove_file(&tmp);
            return Err(error);
        }
        // SAFETY: what the operator's own binary, run as the compiler process with this
        // engine's limits, returned from `precompile_component` for these bytes (a child only
        // so that its memory is bounded), held unchanged since: the memfd sealed before it is
        // mapped. wasmtime refuses code made by another version or with other settings.
        let loaded = match memfd.and_then(|memfd| sealed_code::seal(&memfd).map(|()| memfd)) {
            Ok(memfd) => unsafe { sealed_code::load_sealed(engine, &memfd) },
            Err(_) if !held.is_empty() => unsafe { sealed_code::load(engine, &held) },
            // Made and filled, then not sealed (a kernel refusing seals on a memfd made for
            // them): refused rather than mapped while it could still change.
            Err(error) => Err(wasmtime::Error::from(error).context("sealing the compiled code's memfd")),
        };
        match (file, loaded.is_ok()) {
            (Some(file), true) => self.put(&path, &tmp, file, mac.tag()),
            _ => {
                let _ = std::fs::remove_file(&tmp);
            }
        }
        Ok(loaded)
    }

    /// What the MAC binds the code to: its name, which holds the module's digest and the
    /// engine's compatibility hash (another module's code under this name does not verify).
    fn context(path: &Path) -> Vec<u8> {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        format!("zundoko-operator compiled module v1\0{name}").into_bytes()
    }

    fn read(&self, engine: &Engine, path: &Path) -> Option<Component> {
        // One open file: its bytes are read once, checked, and deserialized as read (not
        // mapped by path again, which another writer could swap in between).
        let mut file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path).ok()?;
        let len = file.metadata().ok()?.len();
        let sealed = match self.copy_checked(&mut file, len, &Self::context(path)) {
            Ok(Some(sealed)) => sealed,
            Ok(None) => return self.not_ours(path),
            // No memfd here, or the file could not be read through: the whole file, as bytes.
            Err(_) => return self.read_whole(engine, path, file, len),
        };
        crate::supply::disk_cache::touch(&file);
        drop(file);
        // SAFETY: the memfd holds exactly the bytes that carry the MAC, under the operator's
        // own key, that the operator writes only over what this engine's
        // `precompile_component` (here or in the compiler process) returned for this module,
        // and it was sealed before the MAC was checked; wasmtime refuses them if they were made
        // by another version or with other settings.
        self.fitting(path, unsafe { sealed_code::load_sealed(engine, &sealed) })
    }

    /// A file whose MAC does not verify: dropped, to be compiled again.
    fn not_ours(&self, path: &Path) -> Option<Component> {
        tracing::warn!(path = %path.display(), "a compiled module in the cache was not written by this operator (its MAC does not verify); compiling again");
        self.drop_entry(path);
        None
    }

    /// The component loaded from checked code, or, if wasmtime refused it (another version or
    /// other settings), the file dropped, to be compiled again.
    fn fitting(&self, path: &Path, loaded: wasmtime::Result<Component>) -> Option<Component> {
        match loaded {
            Ok(component) => Some(component),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "a compiled module in the cache does not fit this engine; compiling again");
                self.drop_entry(path);
                None
            }
        }
    }

    /// The code of the cache file `file` (`len` bytes: the code, then its MAC) copied into a
    /// sealed memfd in pieces, its MAC computed on the way: `Some` only if the MAC of exactly
    /// what the memfd holds verifies. The code is never whole in this process's memory (a
    /// CPython component's, 36 MiB, read whole and then copied, was the start's peak: 78 MiB
    /// with the Python rules), and the memfd is sealed before the check, so what was checked
    /// is what runs. `Err` if no memfd could be made or the file not read through.
    fn copy_checked(&self, file: &mut std::fs::File, len: u64, context: &[u8]) -> std::io::Result<Option<std::fs::File>> {
        if len > MAX_FILE_BYTES || len <= MAC_BYTES as u64 {
            return Ok(None);
        }
        let mut mac = self.disk.mac_in_pieces(context);
        let sealed = sealed_code::sealed_from(|memfd| {
            let mut piece = vec![0u8; 1 << 20];
            let mut left = len - MAC_BYTES as u64;
            while left > 0 {
                let want = piece.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                let read = file.read(&mut piece[..want])?;
                if read == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
                mac.update(&piece[..read]);
                memfd.write_all(&piece[..read])?;
                left -= read as u64;
            }
            Ok(())
        })?;
        // The tag, and nothing after it (a file that grew since its length was read is not
        // what was checked).
        let mut tag = [0u8; MAC_BYTES];
        file.read_exact(&mut tag)?;
        let at_end = file.read(&mut [0u8; 1])? == 0;
        Ok((at_end && mac.verify(&tag)).then_some(sealed))
    }

    /// [`read`](Self::read) without a memfd: the file read whole, checked, then loaded (copied
    /// into memory by `sealed_code::load`'s own fallback).
    fn read_whole(&self, engine: &Engine, path: &Path, mut file: std::fs::File, len: u64) -> Option<Component> {
        use std::io::Seek as _;
        file.rewind().ok()?;
        // Sized to the file up front: grown by doubling, the buffer of a 36 MiB file would
        // reserve 64 MiB.
        let mut bytes = Vec::with_capacity(len.min(MAX_FILE_BYTES) as usize + 1);
        let read = (&mut file).take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes);
        let authentic = read.is_ok() && len <= MAX_FILE_BYTES && bytes.len() as u64 <= MAX_FILE_BYTES && bytes.len() > MAC_BYTES && {
            let (code, tag) = bytes.split_at(bytes.len() - MAC_BYTES);
            self.disk.verify(&Self::context(path), code, tag)
        };
        if !authentic {
            return self.not_ours(path);
        }
        crate::supply::disk_cache::touch(&file);
        drop(file);
        let code = &bytes[..bytes.len() - MAC_BYTES];
        // SAFETY: as in `read`: these bytes carry the operator's MAC over what this engine's
        // `precompile_component` returned; wasmtime refuses code of another version.
        self.fitting(path, unsafe { sealed_code::load(engine, code) })
    }

    /// Through a temporary file and a rename, the code and its MAC in one file: a reader finds
    /// the whole file or none. Then the cache is brought back under its bound.
    fn write(&self, path: &Path, code: &[u8]) {
        let tag = self.disk.tag(&Self::context(path), code);
        let tmp = Self::tmp_path(path);
        match Self::create(&tmp).and_then(|mut file| file.write_all(code).map(|()| file)) {
            Ok(file) => self.put(path, &tmp, file, tag),
            Err(error) => {
                let _ = std::fs::remove_file(&tmp);
                tracing::warn!(path = %path.display(), %error, "could not keep a compiled module in the cache");
            }
        }
    }

    /// A temporary file's name of its own for each write: two loads of one module at once
    /// (two rule sets naming the same bytes) each write theirs while their compiles run, one
    /// after the other, and neither truncates the other's.
    fn tmp_path(path: &Path) -> PathBuf {
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        path.with_extension(format!("tmp-{}-{write}", std::process::id()))
    }

    /// A write's temporary file, new and the operator's only.
    fn create(tmp: &Path) -> std::io::Result<std::fs::File> {
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(tmp)
    }

    /// The temporary `file` holding the code: its MAC `tag` after it, then renamed into place
    /// at `path`; and the cache brought back under its bound.
    fn put(&self, path: &Path, tmp: &Path, mut file: std::fs::File, tag: [u8; MAC_BYTES]) {
        let finished = file.write_all(&tag).and_then(|()| file.sync_all()).and_then(|()| std::fs::rename(tmp, path));
        if let Err(error) = finished {
            let _ = std::fs::remove_file(tmp);
            tracing::warn!(path = %path.display(), %error, "could not keep a compiled module in the cache");
        }
        self.disk.collect(path);
    }

    fn drop_entry(&self, path: &Path) {
        let _ = std::fs::remove_file(path);
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
        let dir = crate::supply::disk_cache::private_temp_dir("zundoko-compiled-").unwrap();
        let engine = Engine::default();
        let bytes = component_bytes();
        let cache = CompiledCache::open(&dir).unwrap();
        assert!(!cache.component(&engine, &bytes).unwrap().1, "compiled the first time");
        let files = || std::fs::read_dir(dir.join("compiled")).unwrap().map(|e| e.unwrap().path()).collect::<Vec<_>>();
        assert_eq!(files().len(), 1, "the code and its MAC, in one file: {:?}", files());
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
        assert_eq!(files().len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn code_handed_over_in_pieces_is_loaded_and_kept_and_a_failed_handover_keeps_nothing() {
        let dir = crate::supply::disk_cache::private_temp_dir("zundoko-compiled-").unwrap();
        let engine = Engine::default();
        let bytes = component_bytes();
        let cache = CompiledCache::open(&dir).unwrap();
        let code = engine.precompile_component(&bytes).unwrap();
        let files = || std::fs::read_dir(dir.join("compiled")).unwrap().map(|e| e.unwrap().path()).collect::<Vec<_>>();
        // A handover that fails half-way (the compiler process died): its error, and no file
        // left behind, not even the temporary one.
        let failed = cache.compile_keep_and_load(&engine, &bytes, |sink| {
            sink(&code[..code.len() / 2]).unwrap();
            Err("the compiler process ended with signal 9")
        });
        assert_eq!(failed.err(), Some("the compiler process ended with signal 9"));
        assert!(files().is_empty(), "{:?}", files());
        // Code the engine refuses (not code at all): refused, and not kept.
        let refused = cache.compile_keep_and_load(&engine, &bytes, |sink| sink(b"not compiled code").map(|()| 17).map_err(|e| e.to_string()));
        assert!(refused.unwrap().is_err());
        assert!(files().is_empty(), "{:?}", files());
        // In pieces as the compiler process's pipe gives them: loaded, and kept with a MAC that
        // verifies (the next start loads it from the cache).
        let mut pieces = 0;
        let loaded = cache.compile_keep_and_load(&engine, &bytes, |sink| {
            for piece in code.chunks(4096 + 7) {
                sink(piece).map_err(|e| e.to_string())?;
                pieces += 1;
            }
            Ok::<_, String>(code.len() as u64)
        });
        assert!(pieces > 1, "handed over in {pieces} pieces");
        loaded.unwrap().expect("the code loads");
        assert_eq!(files().len(), 1, "{:?}", files());
        assert_eq!(std::fs::read(cache.path(&engine, &bytes)).unwrap().len(), code.len() + MAC_BYTES, "the code, then its MAC");
        assert!(CompiledCache::open(&dir).unwrap().lookup(&engine, &bytes).is_some(), "its MAC verifies: loaded from the cache");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_load_that_fails_while_another_of_the_same_module_runs_leaves_the_other_whole() {
        // The second load starts while the first one's code is coming, and fails (its compiler
        // process died): each writes a file of its own, so the failed one removes only its own
        // (one shared name: truncated under the first's pieces, then removed from under it).
        let dir = crate::supply::disk_cache::private_temp_dir("zundoko-compiled-").unwrap();
        let engine = Engine::default();
        let bytes = component_bytes();
        let cache = CompiledCache::open(&dir).unwrap();
        let code = engine.precompile_component(&bytes).unwrap();
        let half = code.len() / 2;
        let (first_half_in, second_done) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let loaded = cache.compile_keep_and_load(&engine, &bytes, |sink| {
                    sink(&code[..half]).map_err(|e| e.to_string())?;
                    first_half_in.wait();
                    second_done.wait();
                    sink(&code[half..]).map_err(|e| e.to_string())?;
                    Ok::<_, String>(code.len() as u64)
                });
                loaded.unwrap().expect("the first load");
            });
            first_half_in.wait();
            let failed = cache.compile_keep_and_load(&engine, &bytes, |sink| {
                sink(&code[..100]).map_err(|e| e.to_string())?;
                Err::<u64, _>("the compiler process ended with signal 9".to_string())
            });
            assert!(failed.is_err());
            second_done.wait();
        });
        // The first load kept its file, whole: its MAC verifies.
        assert_eq!(std::fs::read(cache.path(&engine, &bytes)).unwrap().len(), code.len() + MAC_BYTES);
        assert!(CompiledCache::open(&dir).unwrap().lookup(&engine, &bytes).is_some(), "the kept file is whole");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_cache_file_changed_in_place_after_its_check_does_not_change_the_code_loaded() {
        use std::os::unix::fs::FileExt as _;
        let dir = crate::supply::disk_cache::private_temp_dir("zundoko-compiled-").unwrap();
        let engine = Engine::default();
        let bytes = component_bytes();
        let cache = CompiledCache::open(&dir).unwrap();
        let code = engine.precompile_component(&bytes).unwrap();
        cache.write(&cache.path(&engine, &bytes), &code);
        let loaded = cache.lookup(&engine, &bytes).expect("loaded from the cache");
        // The cache's file is not what wasmtime maps: no mapping of it (a private mapping of
        // it would show the writes below on every page not yet copied).
        let path = cache.path(&engine, &bytes);
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert!(!maps.contains(&path.display().to_string()), "the cache's file is mapped:\n{maps}");
        assert!(maps.contains("/memfd:zundoko-compiled-code"), "the code is not mapped from a sealed memfd:\n{maps}");
        // Written over in place, same inode, after the check: the code loaded is unchanged.
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(&vec![0xcc; code.len() / 2], 0).unwrap();
        drop(file);
        assert!(loaded.serialize().unwrap() == code, "the code loaded changed with the file");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
