//! `locus ctl`: the runtime API's client. It checks the command line here (a typo is told at
//! once, with every form), sends it to the switch's control socket or, with `--admin`, to its
//! admin listener's `POST /locus/ctl`, prints the JSON answer and fails when the switch
//! refused the command.

use crate::control::{Command, USAGE};
use anyhow::{Context, bail};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Longest wait for an answer (a reload reads files and builds the policy).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// Arguments of `locus ctl`.
#[derive(clap::Args, Debug)]
#[command(after_help = format!("Commands: {USAGE}"))]
pub struct CtlArgs {
    /// The switch's control socket (`control_socket` in its configuration).
    #[arg(long, default_value = "/run/locus/switch.sock")]
    pub socket: PathBuf,
    /// Send the command to the switch's admin listener instead (`ip:port`; it answers
    /// clients on its own host only).
    #[arg(long, conflicts_with = "socket")]
    pub admin: Option<SocketAddr>,
    /// The command and its arguments, e.g. `drain node2` or `weight node1 3`.
    #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
    pub command: Vec<String>,
}

/// Run `locus ctl`.
pub fn run(args: CtlArgs) -> anyhow::Result<()> {
    let line = args.command.join(" ");
    Command::parse(&line)?;
    let answer = match args.admin {
        Some(addr) => over_http(addr, &line)?,
        None => over_socket(&args.socket, &line)?,
    };
    let value: serde_json::Value = serde_json::from_str(&answer)
        .with_context(|| format!("the switch's answer is not JSON: {answer}"))?;
    if value["ok"] != true {
        bail!("{}", value["error"].as_str().unwrap_or("the switch refused the command"));
    }
    println!("{}", serde_json::to_string_pretty(&value)?);
    Ok(())
}

fn over_socket(path: &PathBuf, line: &str) -> anyhow::Result<String> {
    let mut stream = std::os::unix::net::UnixStream::connect(path)
        .with_context(|| format!("connecting to the control socket {}", path.display()))?;
    stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    stream.write_all(format!("{line}\n").as_bytes())?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).context("reading the answer")?;
    if answer.is_empty() {
        bail!("the switch closed the control connection without an answer");
    }
    Ok(answer)
}

fn over_http(addr: SocketAddr, line: &str) -> anyhow::Result<String> {
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .with_context(|| format!("connecting to the admin listener {addr}"))?;
    stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    let request = format!(
        "POST /locus/ctl HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{line}",
        line.len()
    );
    stream.write_all(request.as_bytes())?;
    let mut response = String::new();
    stream.read_to_string(&mut response).context("reading the answer")?;
    let (_, body) = response.split_once("\r\n\r\n").context("the admin listener's answer has no body")?;
    Ok(body.trim().to_string())
}
