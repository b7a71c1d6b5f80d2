//! `HeadlessBrowser`: Chromium (the Debian package) run headless on a lab host to load one page
//! as a user's browser would — the page, its style sheets and images — and report what the
//! browser itself saw, from its network log (`--log-net-log`): every URL it requested and the
//! status it got, over HTTP or HTTPS. Optionally writes a screenshot. Background networking is
//! switched off; the lab hosts have no route out anyway.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::LabError;
use locus_rig::Net;
use locus_rig::find_program;

/// Page loads so far (numbers the network logs).
static VISITS: AtomicU64 = AtomicU64::new(0);

/// Longest a page load may take before the browser is killed.
const PAGE_TIMEOUT: Duration = Duration::from_secs(60);

/// Flags that keep Chromium from contacting anything but the page's servers.
const QUIET_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-sync",
    "--disable-extensions",
    "--metrics-recording-only",
    "--no-default-browser-check",
    // Every name lookup fails but the lab's and loopback addresses: the browser's own
    // background requests (update checks, time) go nowhere.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 10.253.0.*, EXCLUDE 127.0.0.*",
];

/// One request the browser made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrowserRequest {
    pub url: String,
    /// The response's status code; `None` if no response headers arrived.
    pub status: Option<u16>,
}

/// What one page load did.
#[derive(Clone, Debug)]
pub struct PageLoad {
    /// The page's URL.
    pub url: String,
    /// Every `http://` and `https://` request, in the order the browser started them.
    pub requests: Vec<BrowserRequest>,
    /// The screenshot, if one was asked for and written.
    pub screenshot: Option<PathBuf>,
}

impl PageLoad {
    /// Requests to the servers at `authorities` (`10.253.0.11:80`; the browser's own
    /// background requests elsewhere aside) that did not get a 2xx or 304, the browser's
    /// `/favicon.ico` probe aside.
    pub fn failures(&self, authorities: &[String]) -> Vec<&BrowserRequest> {
        self.requests
            .iter()
            .filter(|r| authorities.iter().any(|a| names_authority(&r.url, a)))
            .filter(|r| !r.url.ends_with("/favicon.ico"))
            .filter(|r| !matches!(r.status, Some(200..=299 | 304)))
            .collect()
    }

    /// Requests to the servers at `authorities`.
    pub fn requests_to(&self, authorities: &[String]) -> Vec<&BrowserRequest> {
        self.requests.iter().filter(|r| authorities.iter().any(|a| names_authority(&r.url, a))).collect()
    }
}

/// The Chromium executable on this machine.
pub fn chromium() -> Result<PathBuf, LabError> {
    ["chromium", "chromium-browser"].iter().find_map(|p| find_program(p)).ok_or_else(|| LabError::Point {
        point: "browser".into(),
        message: "Chromium is not installed (Debian package `chromium`; `./quickstart` installs it)".into(),
    })
}

/// Load `url` in headless Chromium on `role`'s host; `work` holds the network log (and the
/// screenshot, if `screenshot` names a file there or elsewhere).
pub fn load_page(
    net: &Net,
    role: &str,
    url: &str,
    work: &Path,
    screenshot: Option<&Path>,
) -> Result<PageLoad, LabError> {
    load_page_with(net, role, url, work, screenshot, &[])
}

/// `load_page` with more Chromium flags (`--ignore-certificate-errors` for a lab certificate
/// no CA signed, say).
pub fn load_page_with(
    net: &Net,
    role: &str,
    url: &str,
    work: &Path,
    screenshot: Option<&Path>,
    flags: &[&str],
) -> Result<PageLoad, LabError> {
    let browser = chromium()?;
    std::fs::create_dir_all(work).map_err(|e| LabError::io(work, e))?;
    let visit = VISITS.fetch_add(1, Ordering::Relaxed);
    let netlog = work.join(format!("netlog-{visit:03}-{}.json", url_slug(url)));
    let profile = work.join("profile");
    let mut cmd: Command = net.command(role, &browser)?;
    cmd.args(QUIET_FLAGS)
        .args(flags)
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--log-net-log={}", netlog.display()))
        .arg("--window-size=1024,768")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    match screenshot {
        Some(path) => cmd.arg(format!("--screenshot={}", path.display())),
        None => cmd.arg("--dump-dom"),
    };
    cmd.arg(url);
    let mut child = cmd.spawn().map_err(|e| LabError::system(format!("start {}", browser.display()), e))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > PAGE_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(LabError::Point {
                    point: "browser".into(),
                    message: format!("{url}: no page after {} s", PAGE_TIMEOUT.as_secs()),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(LabError::system("wait for chromium", e)),
        }
    }
    let text = std::fs::read_to_string(&netlog).map_err(|e| LabError::io(&netlog, e))?;
    let requests = parse_net_log(&text).map_err(|message| LabError::Point {
        point: "browser".into(),
        message: format!("{}: {message}", netlog.display()),
    })?;
    let screenshot = screenshot.filter(|p| p.is_file()).map(Path::to_path_buf);
    Ok(PageLoad { url: url.to_string(), requests, screenshot })
}

/// Whether `url` is on the server at `authority`; the browser writes `host:80` (`host:443`
/// over HTTPS) as `host`.
fn names_authority(url: &str, authority: &str) -> bool {
    let (rest, default_port) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (rest, ":80"),
        (_, Some(rest)) => (rest, ":443"),
        _ => return false,
    };
    let host = rest.split('/').next().unwrap_or("");
    host == authority || authority.strip_suffix(default_port) == Some(host)
}

fn url_slug(url: &str) -> String {
    url.bytes().filter(u8::is_ascii_alphanumeric).take(40).map(char::from).collect()
}

/// The `http://` and `https://` requests of a Chromium network log and the status each got: a request's URL
/// comes from its `URL_REQUEST_START_JOB` event, its status from the first response headers
/// of the same source.
pub fn parse_net_log(text: &str) -> Result<Vec<BrowserRequest>, String> {
    // A log cut short by a killed browser lacks its closing brackets; the events are complete.
    let value: serde_json::Value = serde_json::from_str(text)
        .or_else(|_| serde_json::from_str(&format!("{}]}}", text.trim_end().trim_end_matches(','))))
        .map_err(|e| format!("not a network log: {e}"))?;
    let types = value["constants"]["logEventTypes"].as_object().ok_or("no event types in the log")?;
    let type_id = |name: &str| types.get(name).and_then(|v| v.as_u64());
    let start = type_id("URL_REQUEST_START_JOB").ok_or("no URL_REQUEST_START_JOB type")?;
    let headers = type_id("HTTP_TRANSACTION_READ_RESPONSE_HEADERS").ok_or("no response header type")?;
    let events = value["events"].as_array().ok_or("no events in the log")?;
    let mut order: Vec<(u64, String)> = Vec::new();
    let mut status: HashMap<u64, u16> = HashMap::new();
    for e in events {
        let (Some(kind), Some(source)) = (e["type"].as_u64(), e["source"]["id"].as_u64()) else { continue };
        if kind == start {
            if let Some(url) =
                e["params"]["url"].as_str().filter(|u| u.starts_with("http://") || u.starts_with("https://"))
            {
                order.push((source, url.to_string()));
            }
        } else if kind == headers
            && let Some(line) = e["params"]["headers"].get(0).and_then(|h| h.as_str())
            && let Some(code) = line.split_whitespace().nth(1).and_then(|c| c.parse().ok())
        {
            status.entry(source).or_insert(code);
        }
    }
    Ok(order
        .into_iter()
        .map(|(source, url)| BrowserRequest { url, status: status.get(&source).copied() })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r#"{"constants":{"logEventTypes":{"URL_REQUEST_START_JOB":3,"HTTP_TRANSACTION_READ_RESPONSE_HEADERS":7}},
      "events":[
        {"type":3,"source":{"id":10},"params":{"url":"http://10.0.0.1/index.html"}},
        {"type":7,"source":{"id":10},"params":{"headers":["HTTP/1.1 200 OK","Content-Length: 5"]}},
        {"type":3,"source":{"id":11},"params":{"url":"http://10.0.0.2/~migrate/1/node1/a.gif"}},
        {"type":3,"source":{"id":12},"params":{"url":"https://example.invalid/x"}},
        {"type":7,"source":{"id":11},"params":{"headers":["HTTP/1.1 404 Not Found"]}},
        {"type":3,"source":{"id":13},"params":{"url":"http://10.0.0.1/favicon.ico"}},
        {"type":7,"source":{"id":13},"params":{"headers":["HTTP/1.1 404 Not Found"]}},
        {"type":3,"source":{"id":14},"params":{"url":"http://10.0.0.1/b.css"}},"#;

    #[test]
    fn net_log_pairs_each_request_with_its_status_even_when_cut_short() {
        let requests = parse_net_log(LOG).unwrap();
        let urls: Vec<&str> = requests.iter().map(|r| r.url.as_str()).collect();
        assert_eq!(urls.len(), 5, "{urls:?}");
        assert_eq!(requests[0].status, Some(200));
        assert_eq!(requests[1].status, Some(404));
        assert_eq!(requests[2].url, "https://example.invalid/x");
        assert_eq!(requests[4].status, None, "no headers arrived");
        let load = PageLoad { url: urls[0].into(), requests: requests.clone(), screenshot: None };
        let hosts = ["10.0.0.1".to_string(), "10.0.0.2".to_string()];
        let failed: Vec<&str> = load.failures(&hosts).iter().map(|r| r.url.as_str()).collect();
        assert_eq!(failed, vec!["http://10.0.0.2/~migrate/1/node1/a.gif", "http://10.0.0.1/b.css"]);
        let failed_on_one = load.failures(&hosts[..1]).len();
        assert_eq!(failed_on_one, 1, "requests to other hosts are not the cluster's");
        assert_eq!(load.failures(&["10.0.0.2:80".to_string()]).len(), 1, "port 80 is left out of URLs");
        assert!(names_authority("https://10.0.0.3/x", "10.0.0.3:443"), "and 443 out of https ones");
        assert!(!names_authority("https://10.0.0.3/x", "10.0.0.3:80"));
    }

    #[test]
    fn a_file_that_is_not_a_net_log_is_an_error() {
        assert!(parse_net_log("hello").is_err());
        assert!(parse_net_log("{\"events\":[]}").is_err());
    }
}
