//! The local loop of a Language author (`pilotage serve --language PATH`):
//! Language components read from files and served for the demo tenant,
//! each reloaded when its file changes, so an author edits, rebuilds and
//! retries with any MCP client without restarting the server.
//!
//! A file goes through what an upload goes through (`admin`, Part II
//! §10.1): the engine loads it (compiles it, checks its imports, calls
//! `describe`), and the conformance lint ([`pilotage_engine::lint`], Part
//! II §5) must find no error. At start a failure stops the server with the
//! findings ([`LanguageFileError`]); later, a failing version is refused
//! with a logged warning and the previous version keeps serving. A version
//! that passes is installed with [`Platform::install_language`], the path
//! an admin upload takes, so connected sessions get
//! `notifications/tools/list_changed` (Part III §4.7). Nothing is written
//! to the store: the files are the source, for this process only.
//!
//! A file's Language replaces the demo tenant's version of the same name
//! (bundled or uploaded) for as long as the file declares that name; when
//! a reload gives the file's Language another name, the old name is
//! retired and the version it had replaced serves again. Two files may not
//! declare the same Language.
//!
//! Every load reports how long it took (`load_ms` in the log line and
//! [`LanguageFileStatus::last_load_ms`]). A rewrite with the same bytes
//! costs a read and a hash: the engine hands back the component serving.
//! A rebuild with other bytes reuses the compiled functions it shares with
//! earlier builds when the engine has a function cache, which the server
//! gives it whenever Language files are served
//! ([`pilotage_engine::function_cache`]).
//!
//! Why polling: a build writes its artifact in several ways (cargo
//! hard-links or copies a new file over the old path, other tools truncate
//! and rewrite it in place, an editor renames a temporary over it). A
//! kernel watch (inotify, through the `notify` crate) follows an inode, so
//! it loses a file replaced by a new one unless the whole folder is watched
//! and filtered. Reading each path's length and modification time every
//! [`POLL_EVERY`] sees every one of those the same way, costs one `stat` per
//! file, and needs no dependency.
//!
//! ```no_run
//! # async fn example(platform: pilotage_server::tenancy::Platform) -> Result<(), Box<dyn std::error::Error>> {
//! use pilotage_server::language_watch::LanguageFiles;
//! let paths = vec![std::path::PathBuf::from("target/guests/wasm32-wasip2/guest/workflow.wasm")];
//! let mut files = LanguageFiles::load(platform.engine(), &paths, "demo", 32 << 20).await?;
//! files.install(&platform).await;
//! tokio::spawn(files.watch(platform.clone(), tokio_util::sync::CancellationToken::new()));
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::tenancy::{LanguageSlot, Platform};
use pilotage_engine::lint::{LintFinding, LintSeverity, has_errors, lint};
use pilotage_engine::{Component, Engine};

/// How often each file's length and modification time are read. A change
/// is acted on once two consecutive polls agree (a build may write the file
/// in several steps), so a rebuilt component serves within about two polls
/// plus its compilation.
pub const POLL_EVERY: Duration = Duration::from_millis(400);

/// How many hex digits of a component's SHA-256 the log lines show.
pub const SHA256_PREFIX_LEN: usize = 12;

/// Occurs when a Language file cannot be served: at start it stops the
/// server; on a reload the previous version keeps serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LanguageFileError {
    /// Occurs when the file cannot be opened or read (missing, a folder,
    /// no permission).
    #[error("cannot read the Language file {}: {error}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// Occurs when the file is larger than `max_component_bytes`, the
    /// bound of an upload.
    #[error("the Language file {} is larger than max_component_bytes ({limit} bytes)", .path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The bound, in bytes.
        limit: usize,
    },
    /// Occurs when the engine does not load the bytes: not a WebAssembly
    /// component, imports the platform does not grant, or a failing
    /// `describe` (Part II §10.1).
    #[error("the Language file {} (sha256 {}) is not loadable: {message}", .path.display(), short(.sha256))]
    NotLoadable {
        /// The file.
        path: PathBuf,
        /// The SHA-256 of the bytes read, hex.
        sha256: String,
        /// The engine's reason.
        message: String,
    },
    /// Occurs when the conformance lint finds at least one error (Part II
    /// §5); `findings` holds every finding, errors first.
    #[error("the Language file {}: {name} (sha256 {}) does not pass the conformance lint:{}",
            .path.display(), short(.sha256), render_findings(.findings))]
    LintFailed {
        /// The file.
        path: PathBuf,
        /// The Language the component declares.
        name: String,
        /// The component's SHA-256, hex.
        sha256: String,
        /// The lint's findings.
        findings: Vec<LintFinding>,
    },
    /// Occurs when the file's Language has the name of another file's
    /// Language: a tenant serves one version of a name.
    #[error("the Language file {} declares {name}, which the file {} already serves", .path.display(), .other.display())]
    DuplicateName {
        /// The file.
        path: PathBuf,
        /// The Language name both declare.
        name: String,
        /// The other file.
        other: PathBuf,
    },
    /// Occurs when the thread loading the component fails (a host fault,
    /// logged; the server carries on).
    #[error("the Language file {} could not be loaded: {message}", .path.display())]
    Internal {
        /// The file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
}

/// The first [`SHA256_PREFIX_LEN`] hex digits of a SHA-256.
fn short(sha256: &str) -> &str {
    sha256.get(..SHA256_PREFIX_LEN).unwrap_or(sha256)
}

/// Milliseconds since `started`, for the reload time a log line reports.
fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// One finding per line, as `pilotage language check` prints them:
/// `  error [rule] message`.
fn render_findings(findings: &[LintFinding]) -> String {
    findings.iter().map(|finding| format!("\n  {finding}")).collect()
}

/// A component read from a file that loaded and passed the lint.
struct Checked {
    component: Component,
    findings: Vec<LintFinding>,
}

/// Reads at most `limit` bytes of `path`.
fn read_bounded(path: &Path, limit: usize) -> Result<Vec<u8>, LanguageFileError> {
    let read_error = |error| LanguageFileError::Read { path: path.to_owned(), error };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1).read_to_end(&mut bytes).map_err(read_error)?;
    if bytes.len() > limit {
        return Err(LanguageFileError::TooLarge { path: path.to_owned(), limit });
    }
    Ok(bytes)
}

/// Reads, loads and lints one file, as an upload is checked. Blocking
/// (compilation): call on a blocking thread.
fn check_file(engine: &Engine, path: &Path, limit: usize) -> Result<Checked, LanguageFileError> {
    let bytes = read_bounded(path, limit)?;
    let component = engine.load(&bytes).map_err(|error| LanguageFileError::NotLoadable {
        path: path.to_owned(),
        sha256: hex::encode(Sha256::digest(&bytes)),
        message: error.to_string(),
    })?;
    let findings = lint(component.description());
    if has_errors(&findings) {
        return Err(LanguageFileError::LintFailed {
            path: path.to_owned(),
            name: component.description().name.clone(),
            sha256: component.sha256().to_owned(),
            findings,
        });
    }
    Ok(Checked { component, findings })
}

/// [`check_file`] on a blocking thread.
async fn check_file_off_thread(engine: &Engine, path: &Path, limit: usize) -> Result<Checked, LanguageFileError> {
    let engine = engine.clone();
    let owned = path.to_owned();
    tokio::task::spawn_blocking(move || check_file(&engine, &owned, limit)).await.unwrap_or_else(|error| {
        Err(LanguageFileError::Internal {
            path: path.to_owned(),
            message: format!("the loading thread failed: {error}"),
        })
    })
}

/// What a file looked like at one poll: its length and modification time,
/// or `None` when it could not be read (missing, for instance while a
/// build replaces it).
type Stamp = Option<(u64, Option<SystemTime>)>;

/// The stamp of `path` now. One `stat`, short enough to make on the
/// async thread.
fn stamp_of(path: &Path) -> Stamp {
    std::fs::metadata(path).ok().map(|metadata| (metadata.len(), metadata.modified().ok()))
}

/// What one watched file serves, and how its reloads went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LanguageFileStatus {
    /// The file, as configured.
    pub path: PathBuf,
    /// The Language it serves.
    pub name: String,
    /// The SHA-256 of the component serving, hex.
    pub sha256: String,
    /// Versions installed since the start (the first one not counted).
    pub reloads: u64,
    /// Versions refused since the start (each left the previous serving).
    pub refusals: u64,
    /// Times the file was rewritten with the bytes serving (same SHA-256):
    /// nothing was compiled, described again or announced.
    pub unchanged: u64,
    /// Why the last refused version was refused.
    pub last_refusal: Option<String>,
    /// How long the last load took, in milliseconds: from the poll that
    /// saw the file settle to the version serving (read, hash, compile or
    /// reuse, describe, lint, install), or to its refusal. At start, the
    /// first load.
    pub last_load_ms: u64,
}

/// A view of the watched files' state, shared with the watcher task;
/// cheap to clone. Empty when no file is configured.
#[derive(Clone, Debug, Default)]
pub struct LanguageFilesStatus {
    files: Arc<Mutex<Vec<LanguageFileStatus>>>,
}

impl LanguageFilesStatus {
    /// Every watched file's status, in the configured order.
    pub fn files(&self) -> Vec<LanguageFileStatus> {
        self.files.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn update(&self, index: usize, change: impl FnOnce(&mut LanguageFileStatus)) {
        if let Some(status) = self.files.lock().unwrap_or_else(|p| p.into_inner()).get_mut(index) {
            change(status);
        }
    }
}

/// One watched file.
struct WatchedFile {
    path: PathBuf,
    /// The Language it serves.
    name: String,
    /// The component it serves (kept for its hash; the tenant holds it).
    sha256: String,
    /// Loaded at start, until [`LanguageFiles::install`].
    initial: Option<Component>,
    /// The stamp last acted on (loaded or refused).
    seen: Stamp,
    /// A stamp different from `seen`, seen once, waiting for the next poll
    /// to agree.
    pending: Option<Stamp>,
    /// How long its first load took (milliseconds).
    load_ms: u64,
}

/// The Language files of the demo tenant (`Settings::languages`): loaded
/// and checked by [`LanguageFiles::load`], installed by
/// [`LanguageFiles::install`], then watched by [`LanguageFiles::watch`].
pub struct LanguageFiles {
    tenant: String,
    limit: usize,
    files: Vec<WatchedFile>,
    /// The versions files' Languages replaced, by name; each serves again
    /// when no file declares its name any more.
    displaced: BTreeMap<String, Arc<LanguageSlot>>,
    status: LanguageFilesStatus,
}

impl std::fmt::Debug for LanguageFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LanguageFiles").field("tenant", &self.tenant).field("files", &self.status.files()).finish()
    }
}

impl LanguageFiles {
    /// Loads and checks every file of `paths`, for `tenant`, each at most
    /// `limit` bytes (`max_component_bytes`). Nothing is installed yet.
    ///
    /// # Errors
    /// The first file's [`LanguageFileError`]: unreadable, too large, not
    /// loadable, failing the lint, or declaring the Language of an earlier
    /// file.
    pub async fn load(
        engine: &Engine,
        paths: &[PathBuf],
        tenant: &str,
        limit: usize,
    ) -> Result<LanguageFiles, LanguageFileError> {
        let mut files: Vec<WatchedFile> = Vec::new();
        for path in paths {
            // Stamped before it is read: a change while it is read shows at
            // the next poll.
            let seen = stamp_of(path);
            let started = Instant::now();
            let checked = check_file_off_thread(engine, path, limit).await?;
            let load_ms = elapsed_ms(started);
            let name = checked.component.description().name.clone();
            if let Some(other) = files.iter().find(|file| file.name == name) {
                return Err(LanguageFileError::DuplicateName { path: path.clone(), name, other: other.path.clone() });
            }
            for warning in checked.findings.iter().filter(|finding| finding.severity == LintSeverity::Warning) {
                tracing::warn!(path = %path.display(), language = %name, rule = warning.rule, "lint warning: {}", warning.message);
            }
            files.push(WatchedFile {
                path: path.clone(),
                name,
                sha256: checked.component.sha256().to_owned(),
                initial: Some(checked.component),
                seen,
                pending: None,
                load_ms,
            });
        }
        let status = files
            .iter()
            .map(|file| LanguageFileStatus {
                path: file.path.clone(),
                name: file.name.clone(),
                sha256: file.sha256.clone(),
                reloads: 0,
                refusals: 0,
                unchanged: 0,
                last_refusal: None,
                last_load_ms: file.load_ms,
            })
            .collect();
        Ok(LanguageFiles {
            tenant: tenant.to_owned(),
            limit,
            files,
            displaced: BTreeMap::new(),
            status: LanguageFilesStatus { files: Arc::new(Mutex::new(status)) },
        })
    }

    /// The Languages the files serve, in the configured order.
    pub fn names(&self) -> Vec<String> {
        self.files.iter().map(|file| file.name.clone()).collect()
    }

    /// Whether no file was given.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The files' state, updated by the watcher.
    pub fn status(&self) -> LanguageFilesStatus {
        self.status.clone()
    }

    /// Installs the loaded files' Languages for the tenant (after its
    /// bundled and uploaded Languages, which a file's Language of the same
    /// name replaces).
    pub async fn install(&mut self, platform: &Platform) {
        let tenant = platform.add_tenant(&self.tenant);
        for file in &mut self.files {
            let Some(component) = file.initial.take() else { continue };
            if let Some(existing) = tenant.language(&file.name) {
                self.displaced.insert(file.name.clone(), existing);
            }
            platform.install_language(&self.tenant, component).await;
            tracing::info!(
                language = %file.name,
                sha256 = short(&file.sha256),
                path = %file.path.display(),
                replaces = self.displaced.contains_key(&file.name),
                load_ms = file.load_ms,
                "serving a Language from its file; watching it for changes"
            );
        }
    }

    /// Polls the files every [`POLL_EVERY`] and reloads each one that
    /// changed, until `shutdown` is cancelled (a reload under way is
    /// abandoned then). Run it as a task.
    pub async fn watch(mut self, platform: Platform, shutdown: CancellationToken) {
        let mut interval = tokio::time::interval(POLL_EVERY);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = interval.tick() => {}
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.poll(&platform) => {}
            }
        }
    }

    /// One poll of every file.
    async fn poll(&mut self, platform: &Platform) {
        for index in 0..self.files.len() {
            let stamp = stamp_of(&self.files[index].path);
            let file = &mut self.files[index];
            if stamp == file.seen {
                file.pending = None;
                continue;
            }
            if file.pending != Some(stamp) {
                // Changed since the last poll: wait for the next to agree.
                file.pending = Some(stamp);
                continue;
            }
            file.pending = None;
            file.seen = stamp;
            let path = file.path.clone();
            let started = Instant::now();
            let before = platform.engine().function_cache_stats().unwrap_or_default();
            match check_file_off_thread(platform.engine(), &path, self.limit).await {
                Ok(checked) => {
                    let after = platform.engine().function_cache_stats().unwrap_or_default();
                    let functions = (after.hits - before.hits, after.misses - before.misses, after.bytes);
                    self.replace(index, checked, platform, started, functions).await
                }
                Err(error) => self.refuse(index, &error, started),
            }
        }
    }

    /// Serves a reloaded version of file `index`.
    /// `functions`: compiled functions reused and compiled by its load, and
    /// the bytes the engine's function cache holds after it.
    async fn replace(
        &mut self,
        index: usize,
        checked: Checked,
        platform: &Platform,
        started: Instant,
        (reused, compiled, cached_bytes): (u64, u64, usize),
    ) {
        let name = checked.component.description().name.clone();
        let sha256 = checked.component.sha256().to_owned();
        let file = &self.files[index];
        if name == file.name && sha256 == file.sha256 {
            // The same bytes: the engine handed back the component serving
            // (compared by SHA-256), so nothing was compiled or installed.
            let load_ms = elapsed_ms(started);
            tracing::info!(path = %file.path.display(), language = %name, sha256 = short(&sha256), load_ms, "the Language file was rewritten with the same content; nothing to reload");
            self.status.update(index, |status| {
                status.unchanged += 1;
                status.last_load_ms = load_ms;
            });
            return;
        }
        if let Some(other) = self.files.iter().enumerate().find(|(at, other)| *at != index && other.name == name) {
            let error = LanguageFileError::DuplicateName { path: file.path.clone(), name, other: other.1.path.clone() };
            self.refuse(index, &error, started);
            return;
        }
        let previous = file.name.clone();
        let tenant = platform.add_tenant(&self.tenant);
        if name != previous {
            // The old name leaves with the file's Language; what it had
            // replaced serves again, and what the new name replaces is kept.
            // The demo catalog is offered to the new name as to the old.
            crate::demo::tenant::offer_demo_catalog(&tenant, &name);
            tenant.retire_language(&previous);
            if let Some(displaced) = self.displaced.remove(&previous) {
                tenant.install_language((*displaced).clone());
            }
            if let Some(existing) = tenant.language(&name) {
                self.displaced.insert(name.clone(), existing);
            }
        }
        // The upload's path: installs, then tells the tenant's sessions
        // (Part III §4.7), once for the retirement and the install.
        platform.install_language(&self.tenant, checked.component).await;
        for warning in checked.findings.iter().filter(|finding| finding.severity == LintSeverity::Warning) {
            tracing::warn!(language = %name, rule = warning.rule, "lint warning: {}", warning.message);
        }
        let load_ms = elapsed_ms(started);
        let file = &mut self.files[index];
        if name == previous {
            tracing::info!(language = %name, sha256 = short(&sha256), path = %file.path.display(), load_ms, functions_reused = reused, functions_compiled = compiled, function_cache_bytes = cached_bytes, "Language reloaded from its file");
        } else {
            tracing::info!(language = %name, sha256 = short(&sha256), path = %file.path.display(), %previous, load_ms, functions_reused = reused, functions_compiled = compiled, "Language reloaded from its file under a new name");
        }
        file.name = name.clone();
        file.sha256 = sha256.clone();
        self.status.update(index, |status| {
            status.name = name;
            status.sha256 = sha256;
            status.reloads += 1;
            status.last_load_ms = load_ms;
        });
    }

    /// Records a refused version of file `index`; the previous one keeps
    /// serving.
    fn refuse(&self, index: usize, error: &LanguageFileError, started: Instant) {
        let load_ms = elapsed_ms(started);
        let file = &self.files[index];
        tracing::warn!(
            path = %file.path.display(),
            serving = %file.name,
            sha256 = short(&file.sha256),
            load_ms,
            "the Language file was not reloaded; the previous version keeps serving. {error}"
        );
        let message = error.to_string();
        self.status.update(index, |status| {
            status.refusals += 1;
            status.last_refusal = Some(message);
            status.last_load_ms = load_ms;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_render_one_per_line_with_their_rule() {
        let findings = vec![
            LintFinding {
                severity: LintSeverity::Error,
                rule: "core-guide",
                message: "no core guide".into(),
                fix: "add one".into(),
            },
            LintFinding {
                severity: LintSeverity::Warning,
                rule: "core-guide-size",
                message: "too long".into(),
                fix: "shorten it".into(),
            },
        ];
        let error = LanguageFileError::LintFailed {
            path: PathBuf::from("x.wasm"),
            name: "x/v1".into(),
            sha256: "0123456789abcdef".into(),
            findings,
        };
        assert_eq!(
            error.to_string(),
            "the Language file x.wasm: x/v1 (sha256 0123456789ab) does not pass the conformance lint:\n  \
             error [core-guide] no core guide\n    fix: add one\n  \
             warning [core-guide-size] too long\n    fix: shorten it"
        );
    }

    #[test]
    fn a_file_above_the_bound_is_refused_before_it_is_read_whole() {
        let path = std::env::temp_dir().join(format!("pilotage-language-watch-{}.wasm", std::process::id()));
        std::fs::write(&path, vec![0u8; 2048]).unwrap();
        assert!(matches!(read_bounded(&path, 1024), Err(LanguageFileError::TooLarge { limit: 1024, .. })));
        assert_eq!(read_bounded(&path, 2048).unwrap().len(), 2048);
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(read_bounded(&path, 2048), Err(LanguageFileError::Read { .. })));
    }
}
