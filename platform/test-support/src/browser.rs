//! A real headless browser for the tests of pages people look at: Debian's
//! Chromium driven through Debian's `chromedriver` over W3C WebDriver.
//!
//! [`Browser::start`] starts `chromedriver --port=<free port>` as a child
//! process and opens one session with headless Chromium in a fresh profile;
//! the [`Browser`] then does what a person does (go to a page, fill, click,
//! submit, read) and keeps screenshots under `target/test-artifacts/`.
//! Dropping it ends the session, kills chromedriver and removes the profile.
//!
//! Invariant: nothing is skipped. When Chromium or chromedriver is missing,
//! [`Browser::start`] returns [`BrowserError::Missing`], whose message says
//! to install Debian's `chromium` and `chromium-driver` (as `.ci/run` does);
//! a test that `expect`s it fails.
//!
//! The WebDriver client is `thirtyfour` without default features: it talks
//! plain HTTP to chromedriver on loopback through the workspace's own
//! reqwest 0.13 (no TLS stack, no second http/hyper/reqwest). `fantoccini`
//! was the first choice; its TLS features pull aws-lc-sys and cmake, and even
//! without them its `webdriver` crate brings http 0.2, thiserror 1 and a
//! second ICU.
//!
//! ```no_run
//! # async fn example() -> Result<(), pilotage_test_support::browser::BrowserError> {
//! use pilotage_test_support::browser::Browser;
//! let browser = Browser::start().await?;
//! browser.goto("data:text/html,<h1>Hello</h1>").await?;
//! assert_eq!(browser.text("h1").await?, "Hello");
//! browser.screenshot("hello").await?;
//! browser.close().await
//! # }
//! ```

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use thirtyfour::error::WebDriverError;
use thirtyfour::{By, ChromiumLikeCapabilities, DesiredCapabilities, WebDriver, WebElement};

/// A cookie as the browser holds it (name, value, path, domain, secure,
/// httpOnly, expiry in seconds since the epoch, sameSite), from
/// [`Browser::cookies`].
pub use thirtyfour::Cookie;

/// The browser window's size at start, in CSS pixels (width, height): a
/// desktop width. [`Browser::set_window_size`] changes it (a phone is about
/// 390 × 844).
pub const DEFAULT_WINDOW: (u32, u32) = (1280, 800);

/// How long [`Browser::start`] waits for chromedriver to listen on its
/// port before giving up with [`BrowserError::NotReady`].
pub const DRIVER_READY_TIMEOUT: Duration = Duration::from_secs(20);

/// Where Debian installs Chromium.
const CHROMIUM: &str = "/usr/bin/chromium";

/// What the missing-program error tells the reader to do.
const INSTALL_HINT: &str = "install Debian's `chromium` and `chromium-driver` packages \
     (`apt-get install chromium chromium-driver`; .ci/run installs them; README, \"What the tests need\")";

/// Occurs when the browser cannot be started or a browser command fails.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrowserError {
    /// Occurs when Chromium or chromedriver is not installed.
    #[error("{program} is not installed, and the browser tests drive the real one: {INSTALL_HINT}")]
    Missing {
        /// The program looked for (`/usr/bin/chromium`, `chromedriver`).
        program: String,
    },
    /// Occurs when a file or process of the harness cannot be made (the
    /// profile folder, chromedriver's log, the chromedriver process).
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with its path.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// Occurs when chromedriver exits or does not listen on its port within
    /// [`DRIVER_READY_TIMEOUT`].
    #[error("chromedriver did not become ready on port {port}: {why}; its log:\n{log}")]
    NotReady {
        /// The loopback port it was told to listen on.
        port: u16,
        /// It exited (with its status) or the wait timed out.
        why: String,
        /// What chromedriver wrote to stdout and stderr.
        log: String,
    },
    /// Occurs when a WebDriver command fails: no session (Chromium would not
    /// start), no element matches a selector, a script throws, …
    #[error("{action}: {source}")]
    WebDriver {
        /// The command, with its selector or URL (`find "#name"`).
        action: String,
        /// The WebDriver error.
        source: Box<WebDriverError>,
    },
}

/// A step of the harness, named for its error message.
fn step(action: impl Into<String>) -> impl FnOnce(WebDriverError) -> BrowserError {
    let action = action.into();
    move |source| BrowserError::WebDriver { action, source: Box::new(source) }
}

/// A headless Chromium session driven through a chromedriver child
/// process. Selectors are CSS selectors; a command that finds no element
/// returns [`BrowserError::WebDriver`], never panics.
pub struct Browser {
    /// Declared first so it drops first: the session ends (Chromium quits)
    /// while chromedriver still runs.
    driver: WebDriver,
    /// Then chromedriver is killed and the profile removed.
    guard: DriverGuard,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a session with
    /// headless Chromium (`--headless=new --no-sandbox --disable-gpu
    /// --disable-dev-shm-usage`, a fresh `--user-data-dir` under the system
    /// temp dir, a window of [`DEFAULT_WINDOW`]).
    ///
    /// # Errors
    /// [`BrowserError::Missing`] when `/usr/bin/chromium` or `chromedriver`
    /// is not installed; [`BrowserError::Io`] or [`BrowserError::NotReady`]
    /// when chromedriver cannot start; [`BrowserError::WebDriver`] when the
    /// session cannot be opened.
    pub async fn start() -> Result<Browser, BrowserError> {
        if !Path::new(CHROMIUM).is_file() {
            return Err(BrowserError::Missing { program: CHROMIUM.to_owned() });
        }
        let chromedriver_program = find_chromedriver()?;

        // reqwest is built with `rustls-no-provider` in this workspace: its
        // client builder needs a process-wide provider even for plain HTTP.
        let _ = rustls::crypto::ring::default_provider().install_default();

        let profile = std::env::temp_dir().join(crate::unique("pilotage-browser"));
        std::fs::create_dir_all(&profile)
            .map_err(|source| BrowserError::Io { what: format!("creating {}", profile.display()), source })?;
        let log_path = profile.join("chromedriver.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|source| BrowserError::Io { what: format!("creating {}", log_path.display()), source })?;
        let log_err = log
            .try_clone()
            .map_err(|source| BrowserError::Io { what: format!("opening {}", log_path.display()), source })?;

        let port = free_port()?;
        let chromedriver = Command::new(&chromedriver_program)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|source| BrowserError::Io {
                what: format!("starting {}", chromedriver_program.display()),
                source,
            })?;
        // From here on, a failure drops the guard, which kills chromedriver
        // and removes the profile.
        let mut guard = DriverGuard { chromedriver, profile: profile.clone() };
        guard.wait_ready(port, &log_path).await?;

        let mut capabilities = DesiredCapabilities::chrome();
        let (width, height) = DEFAULT_WINDOW;
        let arguments = [
            "--headless=new".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            format!("--user-data-dir={}", profile.join("chromium").display()),
            format!("--window-size={width},{height}"),
        ];
        for argument in &arguments {
            capabilities.add_arg(argument).map_err(step("setting Chromium's arguments"))?;
        }
        capabilities.set_binary(CHROMIUM).map_err(step("setting Chromium's binary"))?;
        let driver = WebDriver::new(format!("http://127.0.0.1:{port}"), capabilities)
            .await
            .map_err(step(format!("opening a headless Chromium session (chromedriver on port {port})")))?;

        Ok(Browser { driver, guard })
    }

    /// Loads `url` (http, https, `data:` or `file:`) and waits for its
    /// load event.
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when navigation fails.
    pub async fn goto(&self, url: &str) -> Result<(), BrowserError> {
        self.driver.goto(url).await.map_err(step(format!("going to {url}")))
    }

    /// The first element matching the CSS `selector`.
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when no element matches (WebDriver's "no
    /// such element") or the selector is invalid.
    pub async fn find(&self, selector: &str) -> Result<Element, BrowserError> {
        let element = self.driver.find(By::Css(selector)).await.map_err(step(format!("finding {selector:?}")))?;
        Ok(Element { element, selector: selector.to_owned() })
    }

    /// Whether at least one element matches the CSS `selector` now (no
    /// waiting).
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when the selector is invalid or the
    /// session is gone.
    pub async fn exists(&self, selector: &str) -> Result<bool, BrowserError> {
        let found = self.driver.find_all(By::Css(selector)).await.map_err(step(format!("looking for {selector:?}")))?;
        Ok(!found.is_empty())
    }

    /// The rendered text of the first element matching `selector`, as a
    /// person reads it (hidden text left out, whitespace collapsed).
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when no element matches.
    pub async fn text(&self, selector: &str) -> Result<String, BrowserError> {
        self.find(selector).await?.text().await
    }

    /// Clears the input matching `selector` and types `value` into it.
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when no element matches or it takes no
    /// text.
    pub async fn fill(&self, selector: &str, value: &str) -> Result<(), BrowserError> {
        self.find(selector).await?.fill(value).await
    }

    /// Clicks the element matching `selector` as a mouse would (it must be
    /// visible and not covered).
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when no element matches or the click is
    /// intercepted.
    pub async fn click(&self, selector: &str) -> Result<(), BrowserError> {
        self.find(selector).await?.click().await
    }

    /// Submits the form matching `selector`, or the form holding the element
    /// matching it, as its default button would (`requestSubmit`: the
    /// form's validation and submit handlers run).
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when no element matches or it is in no
    /// form.
    pub async fn submit(&self, selector: &str) -> Result<(), BrowserError> {
        let element = self.find(selector).await?;
        let argument = element.element.to_json().map_err(step(format!("submitting {selector:?}")))?;
        self.driver
            .execute(
                "const form = arguments[0].closest('form');\
                 if (!form) { throw new Error('not in a form'); }\
                 form.requestSubmit();",
                vec![argument],
            )
            .await
            .map_err(step(format!("submitting the form of {selector:?}")))?;
        Ok(())
    }

    /// Makes the frame (an `iframe` element) matching `selector` the
    /// context of every later command (find, text, script, …), as a person
    /// reading inside it; a sandboxed or cross-origin frame too, which a
    /// page's own script could not read. [`Browser::leave_frames`] returns
    /// to the page.
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when no element matches or it is no
    /// frame.
    pub async fn enter_frame(&self, selector: &str) -> Result<(), BrowserError> {
        let frame = self.find(selector).await?;
        frame.element.enter_frame().await.map_err(step(format!("entering the frame {selector:?}")))
    }

    /// Makes the top-level page the context of later commands again, after
    /// [`Browser::enter_frame`].
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when the session is gone.
    pub async fn leave_frames(&self) -> Result<(), BrowserError> {
        self.driver.enter_default_frame().await.map_err(step("returning to the top-level page"))
    }

    /// The URL of the page shown now.
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when the session is gone.
    pub async fn current_url(&self) -> Result<String, BrowserError> {
        Ok(self.driver.current_url().await.map_err(step("reading the current URL"))?.to_string())
    }

    /// The page's `<title>`.
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when the session is gone.
    pub async fn title(&self) -> Result<String, BrowserError> {
        self.driver.title().await.map_err(step("reading the title"))
    }

    /// Runs `script` as the body of a function in the page, with `args` as
    /// `arguments[0..]`, and returns what it `return`s as JSON (`null` when
    /// nothing).
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when the script throws.
    pub async fn script(&self, script: &str, args: Vec<Value>) -> Result<Value, BrowserError> {
        let returned = self.driver.execute(script, args).await.map_err(step(format!("running {script:?}")))?;
        Ok(returned.json().clone())
    }

    /// The cookies the browser holds for the page shown now, `HttpOnly`
    /// ones included.
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when the session is gone.
    pub async fn cookies(&self) -> Result<Vec<Cookie>, BrowserError> {
        self.driver.get_all_cookies().await.map_err(step("reading the cookies"))
    }

    /// Resizes the window to `width` × `height` CSS pixels (the outer
    /// window; the viewport is what remains of it).
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when the browser refuses the size.
    pub async fn set_window_size(&self, width: u32, height: u32) -> Result<(), BrowserError> {
        self.driver
            .set_window_rect(0, 0, width, height)
            .await
            .map_err(step(format!("setting the window to {width}x{height}")))
    }

    /// Saves a PNG of the viewport to `<target>/test-artifacts/<name>.png`
    /// and returns its path; `<target>` is `CARGO_TARGET_DIR` (relative to
    /// the repository when relative) or the repository's `target/`. An
    /// existing file is replaced.
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when the browser cannot take it;
    /// [`BrowserError::Io`] when the file cannot be written.
    pub async fn screenshot(&self, name: &str) -> Result<PathBuf, BrowserError> {
        let png = self.driver.screenshot_as_png().await.map_err(step(format!("taking screenshot {name:?}")))?;
        let folder = artifacts_dir();
        std::fs::create_dir_all(&folder)
            .map_err(|source| BrowserError::Io { what: format!("creating {}", folder.display()), source })?;
        let path = folder.join(format!("{name}.png"));
        std::fs::write(&path, png)
            .map_err(|source| BrowserError::Io { what: format!("writing {}", path.display()), source })?;
        Ok(path)
    }

    /// Ends the session (Chromium quits); chromedriver is killed and the
    /// profile removed when the `Browser` drops here. Dropping without
    /// `close` ends the session too, blocking the thread while it does.
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when chromedriver does not end the
    /// session.
    pub async fn close(self) -> Result<(), BrowserError> {
        let Browser { driver, guard } = self;
        let ended = driver.quit().await.map_err(step("ending the session"));
        drop(guard);
        ended
    }
}

/// An element found by [`Browser::find`].
pub struct Element {
    element: WebElement,
    selector: String,
}

impl Element {
    /// Its rendered text, as [`Browser::text`].
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when it is no longer in the page.
    pub async fn text(&self) -> Result<String, BrowserError> {
        self.element.text().await.map_err(step(format!("reading the text of {:?}", self.selector)))
    }

    /// The value of its attribute `name`, `None` when it has none.
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when it is no longer in the page.
    pub async fn attribute(&self, name: &str) -> Result<Option<String>, BrowserError> {
        self.element.attr(name).await.map_err(step(format!("reading {name} of {:?}", self.selector)))
    }

    /// Clears it and types `value`, as [`Browser::fill`].
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when it takes no text.
    pub async fn fill(&self, value: &str) -> Result<(), BrowserError> {
        self.element.clear().await.map_err(step(format!("clearing {:?}", self.selector)))?;
        self.element.send_keys(value).await.map_err(step(format!("typing into {:?}", self.selector)))
    }

    /// Clicks it, as [`Browser::click`].
    ///
    /// # Errors
    /// [`BrowserError::WebDriver`] when the click is intercepted.
    pub async fn click(&self) -> Result<(), BrowserError> {
        self.element.click().await.map_err(step(format!("clicking {:?}", self.selector)))
    }
}

/// Kills chromedriver and removes the profile folder when dropped.
struct DriverGuard {
    chromedriver: Child,
    profile: PathBuf,
}

impl DriverGuard {
    /// Waits until chromedriver accepts connections on `port`.
    async fn wait_ready(&mut self, port: u16, log_path: &Path) -> Result<(), BrowserError> {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let deadline = Instant::now() + DRIVER_READY_TIMEOUT;
        let not_ready = |why: String| BrowserError::NotReady {
            port,
            why,
            log: std::fs::read_to_string(log_path).unwrap_or_default(),
        };
        loop {
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.chromedriver.try_wait() {
                return Err(not_ready(format!("it exited with {status}")));
            }
            if Instant::now() > deadline {
                return Err(not_ready(format!("not listening after {DRIVER_READY_TIMEOUT:?}")));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for DriverGuard {
    fn drop(&mut self) {
        let _ = self.chromedriver.kill();
        let _ = self.chromedriver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// `chromedriver` on the `PATH` or in `/usr/bin`.
fn find_chromedriver() -> Result<PathBuf, BrowserError> {
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join("chromedriver"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| BrowserError::Missing { program: "chromedriver".to_owned() })
}

/// A loopback port free now (the OS picks it; it is released for
/// chromedriver to take).
fn free_port() -> Result<u16, BrowserError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|source| BrowserError::Io { what: "finding a free loopback port".to_owned(), source })?;
    listener
        .local_addr()
        .map(|address| address.port())
        .map_err(|source| BrowserError::Io { what: "finding a free loopback port".to_owned(), source })
}

/// `<target>/test-artifacts`, `<target>` as [`Browser::screenshot`] says.
fn artifacts_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| if dir.is_absolute() { dir } else { crate::repository().join(dir) })
        .unwrap_or_else(|| crate::repository().join("target"));
    target.join("test-artifacts")
}
