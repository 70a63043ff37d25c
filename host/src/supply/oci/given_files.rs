//! Small files the operator is given and reads again while it runs (a trusted key every second,
//! a registry's credentials at every pull; both often a mounted Secret), read with a bound
//! before anything is buffered: opened through links (a mounted Secret's entries are links into
//! its `..data` folder) and without blocking (a FIFO put in a file's place does not hang the
//! read), `fstat`-checked as a regular file within the cap, then read up to the cap (a file that
//! grew since the check is stopped there and refused).

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// Why a given file was not read.
#[derive(Debug, thiserror::Error)]
pub enum GivenFileError {
    #[error("cannot read it: {0}")]
    Unreadable(std::io::Error),
    #[error("not a regular file ({0:?})")]
    NotRegular(std::fs::FileType),
    #[error("{size} bytes or more, over the {cap}-byte limit of such a file: not read")]
    TooBig { size: u64, cap: u64 },
}

/// The bytes of `path`, at most `cap` of them (see the module doc).
pub fn read_within(path: &Path, cap: u64) -> Result<Vec<u8>, GivenFileError> {
    let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(GivenFileError::Unreadable)?;
    let found = opened.metadata().map_err(GivenFileError::Unreadable)?;
    if !found.file_type().is_file() {
        return Err(GivenFileError::NotRegular(found.file_type()));
    }
    if found.len() > cap {
        return Err(GivenFileError::TooBig { size: found.len(), cap });
    }
    let mut bytes = Vec::with_capacity(found.len() as usize);
    opened.take(cap + 1).read_to_end(&mut bytes).map_err(GivenFileError::Unreadable)?;
    if bytes.len() as u64 > cap {
        return Err(GivenFileError::TooBig { size: bytes.len() as u64, cap });
    }
    Ok(bytes)
}
