//! The file source: the module file, normally in a ConfigMap volume mounted as a directory.
//!
//! Kubelet updates such a volume by writing a new timestamped directory and renaming a
//! `..data` symlink over the old one; the module path is a symlink through `..data`. So the
//! whole directory is watched (inotify, through notify), not the file: the rename, plain
//! writes, renames over the file, and a file that disappears and comes back all show up as
//! events in it. Events are debounced: after a rename into place or a writer closing the
//! file the file is read as soon as the burst of events is over (1 ms), otherwise only after
//! `settle` without events, so a file being written is not read mid-write (and if it is, the
//! checks refuse the partial module and the whole one follows). A slow poll catches anything
//! missed (a watch lost with its directory, a filesystem without inotify).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind, RenameMode};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::{Candidate, Origin};
use crate::supply::fetch::{self, Checks, Source};
use crate::supply::oci::Registry;

#[derive(Clone, Debug)]
pub struct FileSource {
    pub path: PathBuf,
    /// Quiet time after the last event before the file is read.
    pub settle: Duration,
    /// Re-read (and re-arm the watch) this often even without events.
    pub poll: Duration,
}

impl FileSource {
    /// Read the module file once (`fetch_module`; with `--require-signatures` its signature
    /// beside it verified with `registry`'s keys). `None` if it does not exist (yet).
    pub async fn read(&self, registry: &Registry) -> Option<Candidate> {
        // No pin here (the swapper holds it, for every source) and no bound: a file is as big as
        // whoever wrote it made it, and the sandbox's checks bound what it may ask for.
        let fetched = fetch::fetch_module(Source::File(&self.path), &oci_client::secrets::RegistryAuth::Anonymous, &[], Some(registry), &Checks::default()).await;
        match fetched {
            Err(problem) if problem.reason == fetch::NOT_FOUND => None,
            fetched => Some(Candidate::fetched(Origin::File(self.path.clone()), fetched)),
        }
    }

    /// The digest of the file's bytes now, signature or not.
    async fn digest_now(&self) -> Option<String> {
        let fetched = fetch::fetch_module(Source::File(&self.path), &oci_client::secrets::RegistryAuth::Anonymous, &[], None, &Checks::default()).await;
        fetched.ok().map(|f| f.digest)
    }

    /// Offer the file's content to `candidates` each time it changes, until the receiver is
    /// dropped. `offered` is the digest already offered (the startup module), if any.
    pub async fn watch(self, registry: Arc<Registry>, candidates: mpsc::Sender<Candidate>, mut offered: Option<String>) {
        let dir = self.path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
        let (wake, mut woken) = mpsc::unbounded_channel::<Change>();
        let mut armed: Option<(RecommendedWatcher, u64)> = None;
        let mut missing_reported = false;
        let mut last_read: Option<Stamp> = None;
        let mut poll = tokio::time::interval(self.poll);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // With --require-signatures, new keys read the file again at once.
        let mut keys = registry.keys().subscribe();
        let signed = registry.settings().require_signatures;
        loop {
            // Arm (or re-arm, if the directory was replaced) the watch.
            let inode = std::fs::metadata(&dir).map(|m| m.ino()).ok();
            if inode.is_some() && armed.as_ref().map(|a| a.1) != inode {
                armed = arm(&dir, wake.clone()).map(|w| (w, inode.unwrap()));
            }
            let mut polled = false;
            tokio::select! {
                _ = candidates.closed() => return,
                _ = poll.tick() => polled = true,
                Ok(()) = keys.changed(), if signed => {}
                Some(first) = woken.recv() => {
                    // Debounce: read once the writes have stopped for `settle`, or, after a
                    // sign that a write is whole (a rename into place, as kubelet's `..data`
                    // swap; a writer closing the file), once the burst is over.
                    let mut last = first;
                    loop {
                        let quiet = if last == Change::Whole { WHOLE_SETTLE } else { self.settle };
                        match tokio::time::timeout(quiet, woken.recv()).await {
                            // A removal (kubelet deleting the old version) says nothing
                            // about whether the file is whole.
                            Ok(Some(Change::Removed)) => {}
                            Ok(Some(change)) => last = change,
                            _ => break,
                        }
                    }
                }
            }
            // The poll reads the file again only if its stamp changed (an event or new keys
            // always read it). Taken before the read: a write during it is read next time.
            let now = Stamp::of(&self.path);
            if polled && last_read.as_ref() == Some(&now) {
                continue;
            }
            last_read = Some(now);
            let Some(candidate) = self.read(&registry).await else {
                if !missing_reported {
                    info!(path = %self.path.display(), "the module file is gone; the current module keeps serving until it is back");
                    missing_reported = true;
                }
                continue;
            };
            missing_reported = false;
            let seen = candidate.key().to_owned();
            if offered.as_deref() == Some(seen.as_str()) {
                // Read again, unchanged (an event or a stamp that changed, not the bytes):
                // what the allocator holds freed is given back at once.
                drop(candidate);
                crate::process::memory::release_freed();
                continue;
            }
            debug!(path = %self.path.display(), digest = %seen, "the module file changed");
            // The bytes offered before, no longer trusted (the keys changed): withdrawn, not
            // merely refused as a new module would be.
            let candidate = match offered.as_deref().filter(|was| was.starts_with("sha256:")) {
                Some(was) if candidate.distrusts() && self.digest_now().await.as_deref() == Some(was) => candidate.withdrawing(was),
                _ => candidate,
            };
            offered = Some(seen);
            if candidates.send(candidate).await.is_err() {
                return;
            }
        }
    }
}

/// What the poll compares before it reads the module file again: the file's and its
/// signature's identity, size and times, through the symlinks. Kubelet's swap makes new files
/// (other inodes); a write in place changes the times. Read whole at every poll only to be
/// found unchanged, a CPython component (18 MB) raised the operator's peak RSS by as much,
/// every few seconds (issue 38), and cost the idle operator its hash.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp([Option<FileStamp>; 2]);

/// One file's device, inode, size, and modification and change times (seconds, nanoseconds).
type FileStamp = (u64, u64, u64, i64, i64, i64, i64);

impl Stamp {
    fn of(path: &Path) -> Self {
        let of = |path: &Path| {
            std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()))
        };
        Stamp([of(path), of(&fetch::signature_beside(path))])
    }
}

/// What an event in the directory says about the module file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    /// Something changed; more may follow (a write in progress).
    Partial,
    /// A file was renamed into place or closed after writing: whole, unless more follows.
    Whole,
    /// Something was removed.
    Removed,
}

/// After a [`Change::Whole`], how long to wait for the rest of the burst (kubelet's swap is a
/// symlink create, a rename and a removal within microseconds).
const WHOLE_SETTLE: Duration = Duration::from_millis(1);

/// Watch `dir` (not recursively); each relevant event sends a wake-up.
fn arm(dir: &Path, wake: mpsc::UnboundedSender<Change>) -> Option<RecommendedWatcher> {
    let handler = move |event: notify::Result<notify::Event>| {
        let change = match &event {
            // Our own reads open the file: not a change.
            Ok(e) if matches!(e.kind, EventKind::Access(AccessKind::Open(_) | AccessKind::Read | AccessKind::Close(AccessMode::Read))) => return,
            Ok(e) if matches!(
                e.kind,
                EventKind::Access(AccessKind::Close(AccessMode::Write)) | EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both))
            ) => Change::Whole,
            Ok(e) if matches!(e.kind, EventKind::Remove(_)) => Change::Removed,
            _ => Change::Partial,
        };
        let _ = wake.send(change);
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(error) => {
            warn!(%error, "cannot watch files; falling back to polling");
            return None;
        }
    };
    match watcher.watch(dir, RecursiveMode::NonRecursive) {
        Ok(()) => {
            debug!(dir = %dir.display(), "watching the module directory");
            Some(watcher)
        }
        Err(error) => {
            warn!(dir = %dir.display(), %error, "cannot watch the module directory; polling it");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_changes_with_a_write_in_place_a_swap_and_a_signature_but_not_by_itself() {
        let dir = crate::supply::disk_cache::private_temp_dir("zundoko-stamp-").unwrap();
        let path = dir.join("rules.wasm");
        std::fs::write(&path, b"\0asm one").unwrap();
        let first = Stamp::of(&path);
        assert_eq!(Stamp::of(&path), first, "nothing changed, nothing read");
        // The same size, written in place: the times move (nanoseconds).
        std::thread::sleep(Duration::from_millis(2));
        std::fs::write(&path, b"\0asm two").unwrap();
        let in_place = Stamp::of(&path);
        assert_ne!(in_place, first, "a write in place of the same size");
        // Kubelet's way: a new file renamed over the old one, the times set back as they were.
        let next = dir.join("next.wasm");
        std::fs::write(&next, b"\0asm two").unwrap();
        let old_times = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::File::options().write(true).open(&next).unwrap().set_modified(old_times).unwrap();
        std::fs::rename(&next, &path).unwrap();
        let swapped = Stamp::of(&path);
        assert_ne!(swapped, in_place, "a file renamed into place (another inode)");
        // Its signature beside it, new or gone.
        std::fs::write(dir.join("rules.wasm.sig"), b"sig").unwrap();
        assert_ne!(Stamp::of(&path), swapped, "a signature that appeared");
        std::fs::remove_file(dir.join("rules.wasm.sig")).unwrap();
        assert_eq!(Stamp::of(&path), swapped, "and went");
        std::fs::remove_file(&path).unwrap();
        assert_ne!(Stamp::of(&path), swapped, "a file that is gone");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
