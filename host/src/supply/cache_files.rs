//! The cache's folders (`--cache-dir DIR` and those under it) held open, and every file in them
//! made, published, read and removed relative to the folder's descriptor, never by a path
//! another writer could change in between:
//! - a folder is opened `O_DIRECTORY|O_NOFOLLOW` and must be the operator's (its owner the
//!   operator's UID, writable by no group or other): the root's mode is made 0700 when the
//!   operator owns it; any other folder that is not the operator's stops the start, named;
//! - a file is made `O_CREAT|O_EXCL|O_NOFOLLOW` (0600) under a random name, so it is never
//!   one someone else made or linked first (a predictable name linked to `cache.key` wrote a
//!   layer's bytes into the key), and renamed (or linked) into place with `renameat`/`linkat`;
//! - an entry is opened `O_NOFOLLOW` and `fstat`-checked (a regular file, within the caller's
//!   size cap) before a byte of it is read.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

/// What a write's temporary file is called: this prefix and 32 random hex digits.
pub const TEMP_PREFIX: &str = ".tmp-";

/// Why a cache folder is not used.
#[derive(Debug, thiserror::Error)]
pub enum FolderRefused {
    #[error(
        "the cache directory {path} is owned by UID {owner}, not the operator's ({me}): whoever owns it could plant files the operator would use; give --cache-dir a directory the operator makes or owns (a subdirectory of a volume whose root is root's)"
    )]
    NotOwned { path: PathBuf, owner: u32, me: u32 },
    #[error("the cache directory {path} is writable by its group or others (mode {mode:o}): only the operator may write it; make it 0700")]
    Writable { path: PathBuf, mode: u32 },
    #[error("cannot open the cache directory {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// A cache folder, open.
#[derive(Debug)]
pub struct Folder {
    fd: OwnedFd,
    path: PathBuf,
}

fn c_name(name: &str) -> std::io::Result<CString> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{name:?} is not an entry's name")));
    }
    CString::new(name).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL in an entry's name"))
}

fn check(ret: libc::c_int) -> std::io::Result<libc::c_int> {
    if ret < 0 { Err(std::io::Error::last_os_error()) } else { Ok(ret) }
}

/// The operator's effective UID.
pub fn my_uid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn fstat(fd: libc::c_int) -> std::io::Result<libc::stat> {
    // SAFETY: a zeroed stat is a valid value to be overwritten; fd is open.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstat(fd, &mut st) })?;
    Ok(st)
}

impl Folder {
    /// The cache's root `path` (created 0700 with its parents if missing): the operator's own,
    /// its mode made 0700 if it was more open; refused if another UID owns it.
    pub fn open_root(path: &Path) -> Result<Folder, FolderRefused> {
        let io = |source| FolderRefused::Io { path: path.to_path_buf(), source };
        {
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path).map_err(io)?;
        }
        let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| io(std::io::ErrorKind::InvalidInput.into()))?;
        // SAFETY: a NUL-terminated path; the result is checked.
        let fd = check(unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC) }).map_err(io)?;
        // SAFETY: a descriptor just opened, owned by nothing else.
        let folder = Folder { fd: unsafe { OwnedFd::from_raw_fd(fd) }, path: path.to_path_buf() };
        let st = fstat(folder.raw()).map_err(io)?;
        if st.st_uid != my_uid() {
            return Err(FolderRefused::NotOwned { path: folder.path, owner: st.st_uid, me: my_uid() });
        }
        if st.st_mode & 0o7777 != 0o700 {
            // SAFETY: fchmod on an open descriptor of a directory the operator owns.
            check(unsafe { libc::fchmod(folder.raw(), 0o700) }).map_err(io)?;
        }
        Ok(folder)
    }

    /// The folder `name` under this one (made 0700 if missing): refused unless the operator
    /// owns it and no group or other may write it.
    pub fn sub(&self, name: &str) -> Result<Folder, FolderRefused> {
        let path = self.path.join(name);
        let io = |source| FolderRefused::Io { path: path.clone(), source };
        let c = c_name(name).map_err(io)?;
        // SAFETY: an open directory and a NUL-terminated name.
        match check(unsafe { libc::mkdirat(self.raw(), c.as_ptr(), 0o700) }) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
        // SAFETY: as above; the result is checked.
        let fd = check(unsafe { libc::openat(self.raw(), c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC) }).map_err(io)?;
        // SAFETY: a descriptor just opened, owned by nothing else.
        let folder = Folder { fd: unsafe { OwnedFd::from_raw_fd(fd) }, path };
        let st = fstat(folder.raw()).map_err(|e| FolderRefused::Io { path: folder.path.clone(), source: e })?;
        if st.st_uid != my_uid() {
            return Err(FolderRefused::NotOwned { path: folder.path, owner: st.st_uid, me: my_uid() });
        }
        if st.st_mode & 0o022 != 0 {
            return Err(FolderRefused::Writable { path: folder.path, mode: st.st_mode & 0o7777 });
        }
        Ok(folder)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn raw(&self) -> libc::c_int {
        self.fd.as_raw_fd()
    }

    /// A new file (0600) under a random name no one could have made or linked first; removed
    /// again unless published.
    pub fn create_new(&self) -> std::io::Result<NewFile<'_>> {
        let mut random = [0u8; 16];
        rand::RngCore::fill_bytes(&mut rand::rng(), &mut random);
        let name = c_name(&format!("{TEMP_PREFIX}{}", hex::encode(random)))?;
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: an open directory, a NUL-terminated name, a mode for O_CREAT.
        let fd = check(unsafe { libc::openat(self.raw(), name.as_ptr(), flags, 0o600 as libc::c_uint) })?;
        // SAFETY: a descriptor just opened, owned by nothing else.
        Ok(NewFile { folder: self, file: unsafe { File::from_raw_fd(fd) }, name, placed: false })
    }

    /// The entry `name`, opened without following a link: `None` if there is none; an error
    /// if it is a link, not a regular file, or bigger than `max_bytes` (nothing read of it).
    pub fn open_entry(&self, name: &str, max_bytes: u64) -> std::io::Result<Option<(File, libc::stat)>> {
        let c = c_name(name)?;
        // SAFETY: an open directory and a NUL-terminated name; the result is checked.
        let fd = match check(unsafe { libc::openat(self.raw(), c.as_ptr(), libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC) }) {
            Ok(fd) => fd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        // SAFETY: a descriptor just opened, owned by nothing else.
        let file = unsafe { File::from_raw_fd(fd) };
        let st = fstat(fd)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(std::io::Error::other(format!("{} is not a regular file", self.path.join(name).display())));
        }
        if st.st_size as u64 > max_bytes {
            return Err(std::io::Error::other(format!("{} is {} bytes, over its cap of {max_bytes}", self.path.join(name).display(), st.st_size)));
        }
        Ok(Some((file, st)))
    }

    /// Remove the entry `name` (a file; a link itself, never what it points at).
    pub fn remove(&self, name: &str) -> std::io::Result<()> {
        let c = c_name(name)?;
        // SAFETY: an open directory and a NUL-terminated name.
        check(unsafe { libc::unlinkat(self.raw(), c.as_ptr(), 0) }).map(drop)
    }

    /// Every entry's name with what `lstat` says of it (links not followed).
    pub fn entries(&self) -> std::io::Result<Vec<(String, libc::stat)>> {
        // SAFETY: dup of an open descriptor; fdopendir takes the copy and closedir closes it.
        let dup = check(unsafe { libc::fcntl(self.raw(), libc::F_DUPFD_CLOEXEC, 0) })?;
        let dir = unsafe { libc::fdopendir(dup) };
        if dir.is_null() {
            let error = std::io::Error::last_os_error();
            // SAFETY: the copy, not taken by fdopendir.
            unsafe { libc::close(dup) };
            return Err(error);
        }
        // SAFETY: rewinddir on a stream just opened (a copied descriptor shares its offset).
        unsafe { libc::rewinddir(dir) };
        let mut found = Vec::new();
        loop {
            // SAFETY: readdir on an open stream; the entry is read before the next call.
            let entry = unsafe { libc::readdir(dir) };
            if entry.is_null() {
                break;
            }
            // SAFETY: d_name is NUL-terminated within the entry.
            let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
            if name.to_bytes() == b"." || name.to_bytes() == b".." {
                continue;
            }
            // SAFETY: as fstat; the name is NUL-terminated.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            if unsafe { libc::fstatat(self.raw(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } == 0 {
                found.push((name.to_string_lossy().into_owned(), st));
            }
        }
        // SAFETY: the stream opened above, closed once.
        unsafe { libc::closedir(dir) };
        Ok(found)
    }

    /// Bytes the file system under this folder has free for the operator.
    pub fn free_bytes(&self) -> std::io::Result<u64> {
        // SAFETY: a zeroed statvfs to be overwritten; fd is open.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        check(unsafe { libc::fstatvfs(self.raw(), &mut st) })?;
        Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
    }
}

/// A file made by [`Folder::create_new`], not yet in place.
pub struct NewFile<'a> {
    folder: &'a Folder,
    pub file: File,
    name: CString,
    placed: bool,
}

impl NewFile<'_> {
    /// Synced, then renamed over `name` (a reader finds the whole file or the one before).
    pub fn publish(mut self, name: &str) -> std::io::Result<()> {
        self.file.sync_all()?;
        let to = c_name(name)?;
        // SAFETY: the folder's open descriptor and two NUL-terminated names in it.
        check(unsafe { libc::renameat(self.folder.raw(), self.name.as_ptr(), self.folder.raw(), to.as_ptr()) })?;
        self.placed = true;
        Ok(())
    }

    /// Synced, then linked as `name` only if there is none (`AlreadyExists` otherwise); the
    /// temporary name is removed either way.
    pub fn link_new(self, name: &str) -> std::io::Result<()> {
        self.file.sync_all()?;
        let to = c_name(name)?;
        // SAFETY: as in publish; flags 0: the temporary file itself, no link followed.
        check(unsafe { libc::linkat(self.folder.raw(), self.name.as_ptr(), self.folder.raw(), to.as_ptr(), 0) }).map(drop)
    }
}

impl Drop for NewFile<'_> {
    fn drop(&mut self) {
        if !self.placed {
            // SAFETY: the folder's open descriptor and this file's own temporary name.
            unsafe { libc::unlinkat(self.folder.raw(), self.name.as_ptr(), 0) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};

    fn scratch() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("zundoko-cache-files-{}-{}", std::process::id(), rand::random::<u64>()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn files_are_made_under_fresh_names_and_put_in_place_whole_and_links_are_not_followed() {
        let dir = scratch();
        let root = Folder::open_root(&dir).unwrap();
        let mut made = root.create_new().unwrap();
        made.file.write_all(b"entry").unwrap();
        made.publish("a").unwrap();
        assert_eq!(std::fs::read(dir.join("a")).unwrap(), b"entry");
        let names: Vec<String> = root.entries().unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["a"], "no temporary file left");
        // Dropped unpublished: nothing left.
        drop(root.create_new().unwrap());
        assert_eq!(root.entries().unwrap().len(), 1);
        // An entry that is a link is not opened; one over its cap is not either.
        std::fs::write(dir.join("target"), b"secret").unwrap();
        std::os::unix::fs::symlink("target", dir.join("link")).unwrap();
        assert!(root.open_entry("link", 100).is_err(), "a link is followed");
        assert!(root.open_entry("target", 3).unwrap_err().to_string().contains("over its cap of 3"));
        let (mut file, _) = root.open_entry("target", 100).unwrap().unwrap();
        let mut read = String::new();
        file.read_to_string(&mut read).unwrap();
        assert_eq!(read, "secret");
        assert!(root.open_entry("none", 100).unwrap().is_none());
        // A link made first is not linked over.
        let mut second = root.create_new().unwrap();
        second.file.write_all(b"other").unwrap();
        assert_eq!(second.link_new("a").unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(dir.join("a")).unwrap(), b"entry");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
