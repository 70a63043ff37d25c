//! Compiled modules kept on disk (`--cache-dir DIR`, in `DIR/compiled/`): a restarted operator
//! loads the machine code it compiled before instead of compiling the module again. Keyed by
//! the module's digest and the engine's compatibility hash (wasmtime's own: its version and
//! every setting that changes compiled code); wasmtime checks that again when it loads a file.
//!
//! The code is loaded as code, so it is believed only if the operator wrote it: each file ends
//! with an HMAC-SHA256, under the cache's key (`supply/disk_cache.rs`, which the compiler
//! process never sees), of the file's name and the code. A file is opened once (not through a
//! link, a regular file within [`MAX_FILE_BYTES`]) and copied in pieces into a memfd, which is
//! sealed; the MAC is then computed over what the sealed memfd holds, and wasmtime gets the
//! memfd only if it verifies: what was checked is what runs. A file whose MAC does not verify
//! (damaged, another module's code under this name, written by anyone but the operator) is
//! dropped, with a warning, and compiled anew. Code from the compiler process goes the same
//! way: into a memfd, sealed, and only then its MAC computed and the file written from it.
//!
//! wasmtime maps the checked bytes from a sealed memfd (`sealed_code.rs`), never the cache's
//! file (which anyone with the UID can write after the check): only the code's pages in use are
//! resident, not the whole copy `Component::deserialize` would make (a CPython component's code
//! is 36 MiB; the operator idled at 98.6 MiB RSS with it copied, release, warm cache).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{Read as _, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::sealed_code;
use crate::supply::cache_files::{Folder, NewFile};
use crate::supply::disk_cache::{DiskCache, Kept, MAC_BYTES, MacInPieces};

/// A compiled file bigger than this is no file the operator wrote (a CPython component's code
/// is 35 MiB): dropped unread.
const MAX_FILE_BYTES: u64 = 1 << 30;
/// What the code is copied and checked in.
const PIECE: usize = 1 << 20;

/// A cache file's code copied into a memfd that is not sealed yet, and what followed it.
struct Unsealed {
    memfd: std::fs::File,
    /// The MAC the file ends with.
    tag: [u8; MAC_BYTES],
    /// Whether the file ended with it (no byte after the length read first).
    at_end: bool,
}

pub struct CompiledCache {
    disk: Arc<DiskCache>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The MAC, under `mac`'s key and context, of everything the sealed memfd `sealed` holds:
/// the bytes that are mapped, read back after the seal (nothing can change them since).
fn mac_of_sealed(sealed: &std::fs::File, mut mac: MacInPieces) -> std::io::Result<MacInPieces> {
    let len = sealed.metadata()?.len();
    let mut piece = vec![0u8; PIECE];
    let mut at = 0u64;
    while at < len {
        let want = piece.len().min(usize::try_from(len - at).unwrap_or(usize::MAX));
        let read = sealed.read_at(&mut piece[..want], at)?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        mac.update(&piece[..read]);
        at += read as u64;
    }
    Ok(mac)
}

impl CompiledCache {
    pub fn open(root: &Path) -> Result<Self, String> {
        Ok(CompiledCache { disk: DiskCache::open(root)? })
    }

    /// The directory (its bound, its key, what serves).
    pub fn disk(&self) -> &Arc<DiskCache> {
        &self.disk
    }

    fn folder(&self) -> &Folder {
        self.disk.folder(Kept::Compiled)
    }

    /// The file name of a module's code for this engine.
    fn name(&self, engine: &Engine, bytes: &[u8]) -> String {
        let mut compat = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut compat);
        format!("{}-{:016x}.cwasm", sha256_hex(bytes), compat.finish())
    }

    /// The module's compiled code, if a compatible copy the operator wrote is kept.
    pub fn lookup(&self, engine: &Engine, bytes: &[u8]) -> Option<Component> {
        self.read(engine, &self.name(engine, bytes))
    }

    /// The module compiled: from the cache if a compatible copy the operator wrote is there,
    /// else compiled now and kept.
    pub fn component(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<(Component, bool)> {
        let name = self.name(engine, bytes);
        if let Some(component) = self.read(engine, &name) {
            return Ok((component, true));
        }
        let compiled = engine.precompile_component(bytes)?;
        self.write(&name, &compiled);
        // SAFETY: the bytes are what this engine's `precompile_component` just returned.
        let component = unsafe { sealed_code::load(engine, &compiled)? };
        Ok((component, false))
    }

    /// The module compiled by `compile` (the compiler process, with this engine's settings),
    /// which hands its code to the sink it is given in pieces: each piece goes into a new memfd
    /// as it comes, so the code is never whole in this process's memory. The memfd is sealed,
    /// then the cache's file is written from it with the MAC of what it holds, and the
    /// component mapped from it; the file is kept (renamed into place) only once the code
    /// loaded. `Err` is the compile's own error; the inner one, wasmtime's refusal of the code.
    pub fn compile_keep_and_load<E>(
        &self,
        engine: &Engine,
        bytes: &[u8],
        compile: impl FnOnce(&mut (dyn FnMut(&[u8]) -> std::io::Result<()> + Send)) -> Result<u64, E>,
    ) -> Result<wasmtime::Result<Component>, E> {
        let name = self.name(engine, bytes);
        // No memfd here (no memfd_create): the code is held in memory, as `sealed_code::load`
        // would hold it anyway.
        let mut memfd = sealed_code::memfd();
        let mut held = Vec::new();
        compile(&mut |piece: &[u8]| {
            match memfd.as_mut() {
                Ok(memfd) => memfd.write_all(piece)?,
                Err(_) => held.extend_from_slice(piece),
            }
            Ok(())
        })?;
        let context = Self::context(&name);
        // SAFETY: what the operator's own binary, run as the compiler process with this
        // engine's limits, returned from `precompile_component` for these bytes (a child only
        // so that its memory is bounded), held unchanged since: the memfd sealed before it is
        // mapped. wasmtime refuses code made by another version or with other settings.
        let (loaded, kept) = match memfd.and_then(|memfd| sealed_code::seal(&memfd).map(|()| memfd)) {
            Ok(memfd) => (unsafe { sealed_code::load_sealed(engine, &memfd) }, self.keep_sealed(&name, &memfd, &context)),
            Err(_) if !held.is_empty() => {
                let mut mac = self.disk.mac_in_pieces(&context);
                mac.update(&held);
                (unsafe { sealed_code::load(engine, &held) }, self.start_file(&name, &held).map(|file| (file, mac)))
            }
            // Made and filled, then not sealed (a kernel refusing seals on a memfd made for
            // them): refused rather than mapped while it could still change.
            Err(error) => (Err(wasmtime::Error::from(error).context("sealing the compiled code's memfd")), None),
        };
        if let (Some((file, mac)), true) = (kept, loaded.is_ok()) {
            self.put(&name, file, mac.tag());
        }
        Ok(loaded)
    }

    /// A new file holding what the sealed memfd holds, and the MAC of exactly that; `None`
    /// (with a warning) if it cannot be written: the code still loads now.
    fn keep_sealed(&self, name: &str, sealed: &std::fs::File, context: &[u8]) -> Option<(NewFile<'_>, MacInPieces)> {
        let written = (|| {
            let mut made = self.folder().create_new()?;
            let mut piece = vec![0u8; PIECE];
            let mut at = 0u64;
            loop {
                let read = sealed.read_at(&mut piece, at)?;
                if read == 0 {
                    break;
                }
                made.file.write_all(&piece[..read])?;
                at += read as u64;
            }
            let mac = mac_of_sealed(sealed, self.disk.mac_in_pieces(context))?;
            std::io::Result::Ok((made, mac))
        })();
        written.inspect_err(|error| tracing::warn!(name, %error, "could not keep a compiled module in the cache")).ok()
    }

    /// A new file holding `code`; `None` (with a warning) if it cannot be written.
    fn start_file(&self, name: &str, code: &[u8]) -> Option<NewFile<'_>> {
        let written = self.folder().create_new().and_then(|mut made| made.file.write_all(code).map(|()| made));
        written.inspect_err(|error| tracing::warn!(name, %error, "could not keep a compiled module in the cache")).ok()
    }

    /// What the MAC binds the code to: its name, which holds the module's digest and the
    /// engine's compatibility hash (another module's code under this name does not verify).
    fn context(name: &str) -> Vec<u8> {
        format!("zundoko-operator compiled module v1\0{name}").into_bytes()
    }

    fn read(&self, engine: &Engine, name: &str) -> Option<Component> {
        // One open file, never through a link, a regular file within the cap: its bytes are
        // read once, checked, and deserialized as read (not mapped by path again, which
        // another writer could swap in between).
        let (mut file, len) = match self.folder().open_entry(name, MAX_FILE_BYTES) {
            Ok(Some((file, st))) => (file, st.st_size as u64),
            Ok(None) => return None,
            Err(error) => {
                tracing::warn!(name, %error, "a compiled module in the cache is not a file the operator wrote; compiling again");
                self.drop_entry(name);
                return None;
            }
        };
        let sealed = match self.copy_checked(&mut file, len, &Self::context(name)) {
            Ok(Some(sealed)) => sealed,
            Ok(None) => return self.not_ours(name),
            // No memfd here, or the file could not be read through: the whole file, as bytes.
            Err(_) => return self.read_whole(engine, name, file, len),
        };
        crate::supply::disk_cache::touch(&file);
        drop(file);
        // SAFETY: the memfd holds exactly the bytes that carry the MAC, under the operator's
        // own key, that the operator writes only over what this engine's
        // `precompile_component` (here or in the compiler process) returned for this module,
        // and it was sealed before the MAC was computed over what it holds; wasmtime refuses
        // them if they were made by another version or with other settings.
        self.fitting(name, unsafe { sealed_code::load_sealed(engine, &sealed) })
    }

    /// A file whose MAC does not verify: dropped, to be compiled again.
    fn not_ours(&self, name: &str) -> Option<Component> {
        tracing::warn!(path = %self.folder().path().join(name).display(), "a compiled module in the cache was not written by this operator (its MAC does not verify); compiling again");
        self.drop_entry(name);
        None
    }

    /// The component loaded from checked code, or, if wasmtime refused it (another version or
    /// other settings), the file dropped, to be compiled again.
    fn fitting(&self, name: &str, loaded: wasmtime::Result<Component>) -> Option<Component> {
        match loaded {
            Ok(component) => Some(component),
            Err(error) => {
                tracing::warn!(path = %self.folder().path().join(name).display(), %error, "a compiled module in the cache does not fit this engine; compiling again");
                self.drop_entry(name);
                None
            }
        }
    }

    /// The code of the cache file `file` (`len` bytes: the code, then its MAC) copied into a
    /// memfd in pieces and sealed; then the MAC computed over what the sealed memfd holds:
    /// `Some` only if it verifies. The code is never whole in this process's memory (a
    /// CPython component's, 36 MiB, read whole and then copied, was the start's peak: 78 MiB
    /// with the Python rules), and the MAC is of the very bytes wasmtime maps, which nothing
    /// can change once sealed (not even through `/proc/PID/fd/N` between the copy and the
    /// seal). `Err` if no memfd could be made or the file not read through.
    fn copy_checked(&self, file: &mut std::fs::File, len: u64, context: &[u8]) -> std::io::Result<Option<std::fs::File>> {
        match Self::copy_unsealed(file, len)? {
            Some(copied) => self.seal_and_verify(copied, context),
            None => Ok(None),
        }
    }

    /// The first half of [`copy_checked`](Self::copy_checked): the code copied into a new
    /// memfd, not yet sealed, and the tag read after it. Nothing is computed over the bytes as
    /// they are read: whatever the memfd holds by the time it is sealed is what the MAC must
    /// cover. `None`: a length no file the operator wrote has.
    fn copy_unsealed(file: &mut std::fs::File, len: u64) -> std::io::Result<Option<Unsealed>> {
        if len > MAX_FILE_BYTES || len <= MAC_BYTES as u64 {
            return Ok(None);
        }
        let mut memfd = sealed_code::memfd()?;
        let mut piece = vec![0u8; PIECE];
        let mut left = len - MAC_BYTES as u64;
        while left > 0 {
            let want = piece.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            let read = file.read(&mut piece[..want])?;
            if read == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            memfd.write_all(&piece[..read])?;
            left -= read as u64;
        }
        // The tag, and nothing after it (a file that grew since its length was read is not
        // what was checked).
        let mut tag = [0u8; MAC_BYTES];
        file.read_exact(&mut tag)?;
        let at_end = file.read(&mut [0u8; 1])? == 0;
        Ok(Some(Unsealed { memfd, tag, at_end }))
    }

    /// The second half of [`copy_checked`](Self::copy_checked): the memfd sealed, then the MAC
    /// computed over what it holds now, and the memfd handed back only if that verifies.
    fn seal_and_verify(&self, copied: Unsealed, context: &[u8]) -> std::io::Result<Option<std::fs::File>> {
        sealed_code::seal(&copied.memfd)?;
        let mac = mac_of_sealed(&copied.memfd, self.disk.mac_in_pieces(context))?;
        Ok((copied.at_end && mac.verify(&copied.tag)).then_some(copied.memfd))
    }

    /// [`read`](Self::read) without a memfd: the file read whole, checked, then loaded (copied
    /// into memory by `sealed_code::load`'s own fallback).
    fn read_whole(&self, engine: &Engine, name: &str, mut file: std::fs::File, len: u64) -> Option<Component> {
        use std::io::Seek as _;
        file.rewind().ok()?;
        // Sized to the file up front: grown by doubling, the buffer of a 36 MiB file would
        // reserve 64 MiB.
        let mut bytes = Vec::with_capacity(len.min(MAX_FILE_BYTES) as usize + 1);
        let read = (&mut file).take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes);
        let authentic = read.is_ok() && len <= MAX_FILE_BYTES && bytes.len() as u64 <= MAX_FILE_BYTES && bytes.len() > MAC_BYTES && {
            let (code, tag) = bytes.split_at(bytes.len() - MAC_BYTES);
            self.disk.verify(&Self::context(name), code, tag)
        };
        if !authentic {
            return self.not_ours(name);
        }
        crate::supply::disk_cache::touch(&file);
        drop(file);
        let code = &bytes[..bytes.len() - MAC_BYTES];
        // SAFETY: as in `read`: these bytes carry the operator's MAC over what this engine's
        // `precompile_component` returned; wasmtime refuses code of another version.
        self.fitting(name, unsafe { sealed_code::load(engine, code) })
    }

    /// Through a new file and a rename, the code and its MAC in one file: a reader finds the
    /// whole file or none. Then the cache is brought back under its bound.
    fn write(&self, name: &str, code: &[u8]) {
        let tag = self.disk.tag(&Self::context(name), code);
        if let Some(file) = self.start_file(name, code) {
            self.put(name, file, tag);
        }
    }

    /// The new `file` holding the code: its MAC `tag` after it, then renamed into place as
    /// `name`; and the cache brought back under its bound.
    fn put(&self, name: &str, mut file: NewFile<'_>, tag: [u8; MAC_BYTES]) {
        let tenant = super::compile_queue::WhoCompiles::on_this_thread().tenant();
        // Its owner recorded first (`DiskCache::own`): a file in place always has one.
        let finished = file.file.write_all(&tag).and_then(|()| self.disk.own(Kept::Compiled, name, &tenant)).and_then(|()| file.publish(name));
        if let Err(error) = finished {
            tracing::warn!(path = %self.folder().path().join(name).display(), %error, "could not keep a compiled module in the cache");
        }
        self.disk.collect((Kept::Compiled, name), &tenant);
    }

    fn drop_entry(&self, name: &str) {
        let _ = self.folder().remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

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
        assert_eq!(std::fs::read(cache.folder().path().join(cache.name(&engine, &bytes))).unwrap().len(), code.len() + MAC_BYTES, "the code, then its MAC");
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
        assert_eq!(std::fs::read(cache.folder().path().join(cache.name(&engine, &bytes))).unwrap().len(), code.len() + MAC_BYTES);
        assert!(CompiledCache::open(&dir).unwrap().lookup(&engine, &bytes).is_some(), "the kept file is whole");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Another process of the operator's UID writing into a memfd of code through
    /// `/proc/PID/fd/N` (what `PR_SET_DUMPABLE 0` closes in `run`): each byte of `at..at+64`
    /// flipped.
    fn write_through_proc(memfd: &std::fs::File, at: u64) {
        use std::os::fd::AsRawFd as _;
        use std::os::unix::fs::FileExt as _;
        let mut bytes = [0u8; 64];
        memfd.read_exact_at(&mut bytes, at).unwrap();
        let through = std::fs::OpenOptions::new().write(true).open(format!("/proc/self/fd/{}", memfd.as_raw_fd())).unwrap();
        through.write_all_at(&bytes.map(|b| !b), at).unwrap();
    }

    #[test]
    fn code_written_into_its_memfd_after_the_copy_and_before_the_seal_is_refused() {
        use std::os::unix::fs::FileExt as _;
        let dir = crate::supply::disk_cache::private_temp_dir("zundoko-compiled-").unwrap();
        let engine = Engine::default();
        let bytes = component_bytes();
        let cache = CompiledCache::open(&dir).unwrap();
        let code = engine.precompile_component(&bytes).unwrap();
        let name = cache.name(&engine, &bytes);
        cache.write(&name, &code);
        let context = CompiledCache::context(&name);
        let copy = || {
            let (mut file, st) = cache.folder().open_entry(&name, MAX_FILE_BYTES).unwrap().unwrap();
            CompiledCache::copy_unsealed(&mut file, st.st_size as u64).unwrap().expect("a length the operator writes")
        };
        let untouched = cache.seal_and_verify(copy(), &context).unwrap().expect("the file as written verifies");
        let mut held = vec![0u8; code.len()];
        untouched.read_exact_at(&mut held, 0).unwrap();
        assert!(held == code && untouched.metadata().unwrap().len() == code.len() as u64, "the memfd holds the code");
        // The file's bytes were read and are the operator's; the memfd is changed before its
        // seal: the MAC, over what the sealed memfd holds, does not verify. (Over the bytes as
        // they were read, it would, and the changed code would be mapped.)
        let copied = copy();
        write_through_proc(&copied.memfd, code.len() as u64 / 2);
        assert!(cache.seal_and_verify(copied, &context).unwrap().is_none(), "code changed in its memfd before the seal was accepted");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn code_handed_over_then_changed_in_its_memfd_before_the_seal_is_kept_as_mapped() {
        use std::os::fd::AsRawFd as _;
        use std::os::unix::fs::FileExt as _;
        // Modules of this test alone: the memfd it changes is the one holding their code.
        let engine = Engine::default();
        let bytes = wat::parse_str("(component (core module (func (export \"handed-over-then-changed\"))))").unwrap();
        let other = wat::parse_str("(component (core module (func (export \"what-the-memfd-was-changed-to\"))))").unwrap();
        let (code, changed) = (engine.precompile_component(&bytes).unwrap(), engine.precompile_component(&other).unwrap());
        let dir = crate::supply::disk_cache::private_temp_dir("zundoko-compiled-").unwrap();
        let cache = CompiledCache::open(&dir).unwrap();
        let loaded = cache.compile_keep_and_load(&engine, &bytes, |sink| {
            sink(&code).map_err(|e| e.to_string())?;
            // All handed over, not sealed yet: the memfd is replaced through /proc.
            let memfd = std::fs::read_dir("/proc/self/fd").unwrap().filter_map(|e| e.ok()).find_map(|entry| {
                let target = std::fs::read_link(entry.path()).ok()?;
                target.to_str()?.starts_with("/memfd:zundoko-compiled-code").then_some(())?;
                let file = std::fs::File::open(entry.path()).ok()?;
                // SAFETY: fcntl on a descriptor the test opened.
                let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
                let mut held = Vec::new();
                std::io::Read::read_to_end(&mut &file, &mut held).ok()?;
                (seals & libc::F_SEAL_WRITE == 0 && held == code).then_some(entry.path())
            });
            let through = std::fs::OpenOptions::new().write(true).open(memfd.expect("the memfd the code was handed into")).unwrap();
            through.set_len(0).unwrap();
            through.write_all_at(&changed, 0).unwrap();
            Ok::<_, String>(code.len() as u64)
        });
        let loaded = loaded.unwrap().expect("the changed code is code this engine loads");
        assert!(loaded.serialize().unwrap() == changed, "what is mapped is what the memfd held at its seal");
        // What is kept is what was mapped, with a MAC over it: the next start loads the same.
        let kept = CompiledCache::open(&dir).unwrap().lookup(&engine, &bytes).expect("the kept file's MAC verifies over its code");
        assert!(kept.serialize().unwrap() == changed, "the kept code is not what was mapped");
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
        cache.write(&cache.name(&engine, &bytes), &code);
        let loaded = cache.lookup(&engine, &bytes).expect("loaded from the cache");
        // The cache's file is not what wasmtime maps: no mapping of it (a private mapping of
        // it would show the writes below on every page not yet copied).
        let path = cache.folder().path().join(cache.name(&engine, &bytes));
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
