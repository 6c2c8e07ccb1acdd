//! The headless-browser harness (`pilotage_test_support::browser`) proven on
//! a page of its own: Debian's Chromium fills a labelled input, clicks,
//! reads what a person would read and keeps a screenshot; a selector that
//! matches nothing is an error value, not a panic. The pages' own tests use
//! the same harness against the real server.

use pilotage_test_support::browser::Browser;

/// A form whose button writes the input's value into a paragraph and whose
/// submit handler says it was submitted, with no request.
const ECHO_PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Echo</title></head>
<body><main>
<h1>Echo</h1>
<form id="echo-form">
  <label for="name">Name</label> <input id="name" name="name">
  <button type="button" id="echo">Echo</button>
</form>
<p id="out"></p>
<p id="submitted"></p>
</main>
<script>
document.getElementById('echo').addEventListener('click', () => {
  document.getElementById('out').textContent = document.getElementById('name').value;
});
document.getElementById('echo-form').addEventListener('submit', (event) => {
  event.preventDefault();
  document.getElementById('submitted').textContent = 'submitted';
});
</script>
</body></html>"#;

/// `html` as a `data:` URL, every byte but letters and digits percent-encoded
/// (`#` would otherwise start a fragment).
fn data_url(html: &str) -> String {
    let mut url = String::from("data:text/html;charset=utf-8,");
    for byte in html.bytes() {
        if byte.is_ascii_alphanumeric() {
            url.push(char::from(byte));
        } else {
            url.push_str(&format!("%{byte:02X}"));
        }
    }
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_fills_clicks_reads_and_keeps_a_screenshot() {
    let browser = Browser::start().await.unwrap_or_else(|error| panic!("{error}"));
    browser.goto(&data_url(ECHO_PAGE)).await.expect("the page loads");
    assert_eq!(browser.title().await.expect("a title"), "Echo");
    assert!(browser.current_url().await.expect("a URL").starts_with("data:text/html"));

    browser.fill("#name", "Ada Lovelace").await.expect("the input takes text");
    browser.click("#echo").await.expect("the button clicks");
    assert_eq!(browser.text("#out").await.expect("the paragraph"), "Ada Lovelace");
    assert_eq!(
        browser.script("return document.getElementById('name').value;", vec![]).await.expect("the script runs"),
        serde_json::json!("Ada Lovelace")
    );
    browser.submit("#name").await.expect("the form submits");
    assert_eq!(browser.text("#submitted").await.expect("the paragraph"), "submitted");
    assert!(browser.cookies().await.expect("the cookies").is_empty(), "a data: page has no cookies");

    // The other polarity: nothing matches, and that is an error value.
    assert!(browser.exists("#out").await.expect("a query"));
    assert!(!browser.exists("#no-such-element").await.expect("a query"));
    let missing = browser.find("#no-such-element").await.err().expect("finding nothing is an error");
    assert!(missing.to_string().contains("#no-such-element"), "the error names the selector: {missing}");

    browser.set_window_size(390, 844).await.expect("a phone-sized window");
    let screenshot = browser.screenshot("browser_harness_echo").await.expect("a screenshot");
    let png = std::fs::read(&screenshot).expect("the screenshot file");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{} is a PNG", screenshot.display());
    browser.close().await.expect("the session ends");
}
