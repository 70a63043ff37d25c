//! A ConfigMap volume laid out the way kubelet lays it out (its AtomicWriter): the files in a
//! hidden timestamped directory, a `..data` symlink to it, and each key a symlink through
//! `..data`. An update writes a new directory and renames a fresh symlink over `..data`.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub struct ConfigMapVolume {
    pub dir: PathBuf,
    current: Option<PathBuf>,
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

/// A fresh empty directory under cargo's temporary directory for this test target.
pub fn temp_dir(what: &str) -> PathBuf {
    let n = UNIQUE.fetch_add(1, Ordering::SeqCst);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{what}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl ConfigMapVolume {
    pub fn new(what: &str) -> Self {
        ConfigMapVolume { dir: temp_dir(what), current: None }
    }

    /// The path a container would be given: `<mount>/<key>`.
    pub fn path(&self, key: &str) -> PathBuf {
        self.dir.join(key)
    }

    /// Publish a new version of the files atomically, as kubelet does.
    pub fn update(&mut self, files: &[(&str, &[u8])]) {
        let n = UNIQUE.fetch_add(1, Ordering::SeqCst);
        let stamp = format!("..2026_11_21_00_00_00.{n}");
        let version = self.dir.join(&stamp);
        std::fs::create_dir(&version).unwrap();
        for (key, bytes) in files {
            std::fs::write(version.join(key), bytes).unwrap();
        }
        let tmp = self.dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        symlink(&stamp, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
        for (key, _) in files {
            let link = self.dir.join(key);
            if std::fs::symlink_metadata(&link).is_err() {
                symlink(Path::new("..data").join(key), &link).unwrap();
            }
        }
        if let Some(old) = self.current.replace(version) {
            std::fs::remove_dir_all(old).unwrap();
        }
    }
}
