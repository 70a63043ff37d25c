//! Compiled code handed to wasmtime as a file it maps, not as bytes it copies. A CPython
//! component's code is about 36 MiB: `Component::deserialize` copies it into anonymous memory,
//! all of it resident for as long as the module is loaded (and wasmtime makes yet another copy
//! of the linear memory's initial data in a memfd of its own). Mapped from a file instead, only
//! the pages that run or are read are resident (a few MiB), and wasmtime maps the same file,
//! copy-on-write, as each instance's initial linear memory.
//!
//! The file is a memfd (anonymous: no path, nothing on the cache's disk, gone when the module
//! is) holding exactly the bytes the caller checked, sealed against every change (write, grow,
//! shrink, new seals) before wasmtime maps it. A memfd's pages would otherwise be writable by
//! whoever can open `/proc/PID/fd/N` (the same UID, the compiler process included), and a
//! private mapping shows the file's later writes on the pages it has not copied: sealed, the
//! kernel refuses every write, through any descriptor, so what was checked is what runs.

use std::fs::File;
use std::io::{Read as _, Seek as _, Write as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _};

use wasmtime::Engine;
use wasmtime::component::Component;

/// What [`sealed_copy`] seals: no write, no resize, no seal removed or added afterwards.
const SEALS: libc::c_int = libc::F_SEAL_WRITE | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// `code` in a new memfd, sealed (see the module doc).
pub fn sealed_copy(code: &[u8]) -> std::io::Result<File> {
    sealed_from(|file| file.write_all(code))
}

/// A new memfd that `fill` writes, then sealed (see the module doc): for code copied in pieces,
/// never whole in memory.
pub fn sealed_from(fill: impl FnOnce(&mut File) -> std::io::Result<()>) -> std::io::Result<File> {
    let mut file = memfd()?;
    fill(&mut file)?;
    seal(&file)?;
    Ok(file)
}

/// A new memfd for code, empty and not yet sealed: [`seal`] it once written.
pub fn memfd() -> std::io::Result<File> {
    let name = c"zundoko-compiled-code";
    // MFD_NOEXEC_SEAL: the file is never executed as a program (its pages are mapped
    // executable by wasmtime, which the exec seal does not govern); it also keeps memfd_create
    // working where `vm.memfd_noexec` is 2. A kernel older than 6.3 does not know the flag.
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // SAFETY: a NUL-terminated name and known flags; the result is checked.
    let mut fd = unsafe { libc::memfd_create(name.as_ptr(), flags | libc::MFD_NOEXEC_SEAL) };
    if fd < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        // SAFETY: as above.
        fd = unsafe { libc::memfd_create(name.as_ptr(), flags) };
    }
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just made, owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Seal a memfd from [`memfd`] against every change (see the module doc).
pub fn seal(file: &File) -> std::io::Result<()> {
    // SAFETY: fcntl on an open descriptor.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, SEALS) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The component whose compiled code is `code`, mapped from a sealed copy of it; copied into
/// memory as `Component::deserialize` does only if no memfd can be made or mapped here (no
/// /proc, a kernel without memfd), with a warning, since the code is then all resident.
///
/// # Safety
///
/// As `Component::deserialize`: `code` is what this engine's `precompile_component` returned.
pub unsafe fn load(engine: &Engine, code: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: the file holds exactly `code` (the caller's guarantee), sealed.
    let mapped = sealed_copy(code).map_err(wasmtime::Error::from).and_then(|file| unsafe { map_sealed(engine, &file) });
    match mapped {
        Ok(component) => Ok(component),
        Err(error) => {
            tracing::warn!(error = %format!("{error:#}"), "cannot map compiled code from a sealed memfd; copying it into memory instead (all of it resident)");
            // SAFETY: the caller's guarantee; the code is in hand, so nothing is read back.
            unsafe { Component::deserialize(engine, code) }
        }
    }
}

/// The component whose compiled code `file` (a memfd from [`sealed_copy`] or [`sealed_from`])
/// holds, mapped from it; if wasmtime cannot map it (no /proc), its bytes are read back and
/// copied into memory, with a warning.
///
/// # Safety
///
/// As `Component::deserialize`: the file holds what this engine's `precompile_component`
/// returned.
pub unsafe fn load_sealed(engine: &Engine, file: &File) -> wasmtime::Result<Component> {
    // SAFETY: the caller's guarantee.
    match unsafe { map_sealed(engine, file) } {
        Ok(component) => Ok(component),
        Err(error) => {
            tracing::warn!(error = %format!("{error:#}"), "cannot map compiled code from a sealed memfd; copying it into memory instead (all of it resident)");
            let mut code = Vec::new();
            let mut reader = file;
            reader.rewind()?;
            reader.read_to_end(&mut code)?;
            // SAFETY: the caller's guarantee (read back from the sealed file).
            unsafe { Component::deserialize(engine, &code) }
        }
    }
}

/// The component mapped from the sealed memfd `file`, or wasmtime's error.
///
/// # Safety
///
/// As [`load_sealed`].
unsafe fn map_sealed(engine: &Engine, file: &File) -> wasmtime::Result<Component> {
    // wasmtime 48 takes a component's file by path only: the memfd's own, through /proc,
    // which opens this very file (no name another process could swap in).
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    // SAFETY: the caller's guarantee; the file can no longer change (sealed), and wasmtime
    // opens its own descriptor, so `file` may close after.
    unsafe { Component::deserialize_file(engine, path) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_copy_holds_the_bytes_and_refuses_every_write_even_reopened_through_proc() {
        let bytes: Vec<u8> = (0..3 * 4096 + 17).map(|i| (i % 251) as u8).collect();
        let mut file = sealed_copy(&bytes).unwrap();
        let mut read = Vec::new();
        file.rewind().unwrap();
        file.read_to_end(&mut read).unwrap();
        assert_eq!(read, bytes);
        // SAFETY: fcntl on a descriptor the test owns.
        let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
        assert_eq!(seals & SEALS, SEALS, "sealed: {seals:#x}");
        // Another process of the same UID would reach it as /proc/PID/fd/N: open for writing
        // succeeds (the mode allows the owner), every change fails.
        let path = format!("/proc/self/fd/{}", file.as_raw_fd());
        let mut writer = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let refused = writer.write_all(b"changed").unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::EPERM), "a write: {refused}");
        assert!(writer.set_len(1).is_err(), "shrunk");
        assert!(writer.set_len(1 << 20).is_err(), "grown");
        // A shared writable mapping is refused too (a write through it would bypass write(2)).
        // SAFETY: a mapping request on an open descriptor; the result is only compared.
        let shared = unsafe { libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, writer.as_raw_fd(), 0) };
        assert_eq!(shared, libc::MAP_FAILED, "a shared writable mapping of a sealed file");
        // SAFETY: fcntl on a descriptor the test owns; removing seals is not possible at all,
        // adding one is refused by F_SEAL_SEAL.
        assert_ne!(unsafe { libc::fcntl(writer.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_FUTURE_WRITE) }, 0);
        let mut again = Vec::new();
        file.rewind().unwrap();
        file.read_to_end(&mut again).unwrap();
        assert_eq!(again, bytes, "unchanged");
    }
}
