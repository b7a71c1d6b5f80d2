//! The switch's two-way relay three ways on loopback — user-space copy, splice(2) through a pipe,
//! the BPF sockmap — side by side: requests/s and CPU per request of a keep-alive client asking
//! a server for fixed-size responses through a "switch". Root only; prints a markdown table.
//! `cargo bench -p locus-bpf --bench relay [-- --rounds N --sizes 1024,65536,1048576]`

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use locus_bpf::SockmapRelay;

/// Pipe and copy buffer size: what the switch's splice relay asks for (crates/io/src/splice_pipe.rs).
const BUFFER_BYTES: usize = 256 * 1024;
/// Bytes each run moves downstream (requests = this / size, at least `MIN_REQUESTS`): about
/// half a second per run on the 2-core machine at the slowest relay.
const BYTES_PER_RUN: usize = 512 << 20;
const MIN_REQUESTS: usize = 2000;
const MAX_REQUESTS: usize = 20000;
/// A point whose requests/s spread (max-min over median) exceeds this gets extra rounds.
const NOISY: f64 = 0.15;
const EXTRA_PASSES: usize = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Copy,
    Splice,
    Sockmap,
}

const METHODS: [Method; 3] = [Method::Copy, Method::Splice, Method::Sockmap];

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Copy => "copy (read/write)",
            Method::Splice => "splice(2) + pipe",
            Method::Sockmap => "BPF sockmap",
        }
    }
}

/// One run's measurements.
#[derive(Clone, Copy, Debug)]
struct Sample {
    rps: f64,
    /// The switch's own threads (relay thread; for the sockmap, the joining thread + watcher).
    switch_us: f64,
    /// Everything charged to the bench process (client, server, switch, softirq run in them).
    process_us: f64,
    /// kworker and ksoftirqd threads of the whole machine (sockmap redirects are sent by a kworker).
    kthreads_us: f64,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
}

fn thread_cpu_ns() -> u64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills `ru`.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(ru.ru_utime) + us(ru.ru_stime)) * 1000
}

fn schedstat_ns(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.split_whitespace().next()?.parse().ok()
}

/// CPU time of the process's live threads (ns).
fn process_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return 0 };
    dir.flatten().filter_map(|t| schedstat_ns(&format!("{}/schedstat", t.path().display()))).sum()
}

/// CPU time of the thread named `comm` in this process (ns), 0 if none.
fn task_ns(comm: &str) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return 0 };
    dir.flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == comm))
        .filter_map(|t| schedstat_ns(&format!("{}/schedstat", t.path().display())))
        .sum()
}

/// CPU time of all kworker and ksoftirqd threads of the machine (ns).
fn kthreads_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    dir.flatten()
        .filter(|p| p.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter(|p| {
            std::fs::read_to_string(p.path().join("comm"))
                .is_ok_and(|c| c.starts_with("kworker") || c.starts_with("ksoftirqd"))
        })
        .filter_map(|p| schedstat_ns(&format!("{}/schedstat", p.path().display())))
        .sum()
}

struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 writes two descriptors we then own.
        cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
        // SAFETY: just created, owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: F_SETPIPE_SZ on our pipe; failure keeps the default size.
        unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, BUFFER_BYTES as libc::c_int) };
        Ok(Pipe { read, write })
    }
}

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: plain descriptors, no offsets.
    let n = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
}

enum Buffer {
    Copy { buf: Vec<u8>, start: usize, end: usize },
    Pipe { pipe: Pipe, held: usize },
}

/// One direction of the poll-driven relay (the switch's `tunnel` without tokio).
struct Direction<'a> {
    from: &'a TcpStream,
    to: &'a TcpStream,
    buffer: Buffer,
    eof: bool,
    shut: bool,
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

impl Direction<'_> {
    fn held(&self) -> usize {
        match &self.buffer {
            Buffer::Copy { start, end, .. } => end - start,
            Buffer::Pipe { held, .. } => *held,
        }
    }

    fn wants_read(&self) -> bool {
        !self.eof && self.held() == 0
    }

    fn step(&mut self) -> io::Result<bool> {
        let mut progressed = false;
        if self.wants_read() {
            // Into an empty buffer only: EAGAIN then means the socket is drained.
            let r = match &mut self.buffer {
                Buffer::Copy { buf, start, end } => (&mut &*self.from).read(buf).inspect(|&n| {
                    *start = 0;
                    *end = n;
                }),
                Buffer::Pipe { pipe, held } => {
                    splice(self.from.as_raw_fd(), pipe.write.as_raw_fd(), BUFFER_BYTES)
                        .inspect(|&n| *held = n)
                }
            };
            match r {
                Ok(0) => {
                    self.eof = true;
                    progressed = true;
                }
                Ok(_) => progressed = true,
                Err(e) if would_block(&e) => {}
                Err(e) => return Err(e),
            }
        }
        if self.held() > 0 {
            let r = match &mut self.buffer {
                Buffer::Copy { buf, start, end } => {
                    (&mut &*self.to).write(&buf[*start..*end]).inspect(|&n| *start += n)
                }
                Buffer::Pipe { pipe, held } => {
                    splice(pipe.read.as_raw_fd(), self.to.as_raw_fd(), *held).inspect(|&n| *held -= n)
                }
            };
            match r {
                Ok(n) => progressed |= n > 0,
                Err(e) if would_block(&e) => {}
                Err(e) => return Err(e),
            }
        }
        if self.eof && self.held() == 0 && !self.shut {
            let _ = self.to.shutdown(Shutdown::Write);
            self.shut = true;
            progressed = true;
        }
        Ok(progressed)
    }
}

/// Relay both ways until both directions ended, in this thread.
fn relay_poll(client: &TcpStream, node: &TcpStream, method: Method) -> io::Result<()> {
    client.set_nonblocking(true)?;
    node.set_nonblocking(true)?;
    let buffer = || -> io::Result<Buffer> {
        Ok(match method {
            Method::Copy => Buffer::Copy { buf: vec![0; BUFFER_BYTES], start: 0, end: 0 },
            _ => Buffer::Pipe { pipe: Pipe::new()?, held: 0 },
        })
    };
    let mut dirs = [
        Direction { from: client, to: node, buffer: buffer()?, eof: false, shut: false },
        Direction { from: node, to: client, buffer: buffer()?, eof: false, shut: false },
    ];
    while !dirs.iter().all(|d| d.shut) {
        let mut progressed = false;
        for d in &mut dirs {
            progressed |= d.step()?;
        }
        if progressed {
            continue;
        }
        let mut fds =
            [client.as_raw_fd(), node.as_raw_fd()].map(|fd| libc::pollfd { fd, events: 0, revents: 0 });
        for (i, d) in dirs.iter().enumerate() {
            if d.wants_read() {
                fds[i].events |= libc::POLLIN;
            }
            if d.held() > 0 {
                fds[1 - i].events |= libc::POLLOUT;
            }
        }
        // SAFETY: poll reads and writes `fds`.
        cvt(unsafe { libc::poll(fds.as_mut_ptr(), 2, 10_000) })?;
    }
    Ok(())
}

fn nodelay(s: &TcpStream) -> io::Result<()> {
    s.set_nodelay(true)
}

/// One run: `requests` responses of `size` bytes through a switch relaying with `method`.
fn run(method: Method, size: usize, requests: usize, relay: &Arc<SockmapRelay>) -> io::Result<Sample> {
    let server = TcpListener::bind("127.0.0.1:0")?;
    let server_addr = server.local_addr()?;
    let switch = TcpListener::bind("127.0.0.1:0")?;
    let switch_addr = switch.local_addr()?;

    let server_thread = thread::spawn(move || -> io::Result<()> {
        let (mut s, _) = server.accept()?;
        nodelay(&s)?;
        let body = vec![0x5au8; size];
        let mut request = [0u8; 8];
        loop {
            match s.read_exact(&mut request) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e),
            }
            let want = u64::from_le_bytes(request) as usize;
            s.write_all(&body[..want])?;
        }
    });
    let relay2 = Arc::clone(relay);
    let switch_thread = thread::spawn(move || -> io::Result<u64> {
        let (client, _) = switch.accept()?;
        let node = TcpStream::connect(server_addr)?;
        nodelay(&client)?;
        nodelay(&node)?;
        let start = thread_cpu_ns();
        match method {
            Method::Sockmap => {
                let pair = relay2.join(&client, &node).map_err(io::Error::other)?;
                drop((client, node));
                relay2.wait(pair, Duration::from_secs(600)).map_err(io::Error::other)?;
            }
            _ => relay_poll(&client, &node, method)?,
        }
        Ok(thread_cpu_ns() - start)
    });

    let mut client = TcpStream::connect(switch_addr)?;
    nodelay(&client)?;
    client.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut response = vec![0u8; size];
    let request = (size as u64).to_le_bytes();
    // One warm-up exchange: the switch has accepted, connected and (sockmap) joined.
    client.write_all(&request)?;
    client.read_exact(&mut response)?;

    let (proc0, kth0, watch0) = (process_ns(), kthreads_ns(), task_ns("sockmap-relay"));
    let started = Instant::now();
    for _ in 0..requests {
        client.write_all(&request)?;
        client.read_exact(&mut response)?;
    }
    let elapsed = started.elapsed();
    let (proc1, kth1, watch1) = (process_ns(), kthreads_ns(), task_ns("sockmap-relay"));
    client.shutdown(Shutdown::Write)?;
    let mut rest = Vec::new();
    client.read_to_end(&mut rest)?;
    let switch_ns = switch_thread.join().expect("switch thread")?;
    server_thread.join().expect("server thread")?;
    if response.iter().any(|&b| b != 0x5a) || !rest.is_empty() {
        return Err(io::Error::other(format!("{}: response bytes differ", method.name())));
    }
    let per = |ns: u64| ns as f64 / 1000.0 / requests as f64;
    Ok(Sample {
        rps: requests as f64 / elapsed.as_secs_f64(),
        switch_us: per(switch_ns + (watch1 - watch0)),
        process_us: per(proc1 - proc0),
        kthreads_us: per(kth1.saturating_sub(kth0)),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

fn spread(v: &[f64]) -> f64 {
    let (min, max) = v.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    (max - min) / median(v.to_vec())
}

fn size_label(size: usize) -> String {
    match size {
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("relay bench: skipped (needs root to load the BPF sockmap program)");
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let rounds: usize = arg("--rounds").map_or(5, |r| r.parse().expect("--rounds N"));
    let sizes: Vec<usize> = arg("--sizes").map_or(vec![1 << 10, 64 << 10, 1 << 20], |s| {
        s.split(',').map(|x| x.parse().expect("--sizes a,b,c (bytes)")).collect()
    });
    let relay = Arc::new(SockmapRelay::load().expect("load the sockmap relay"));
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    println!("loadavg before: {}", load());

    let mut results: Vec<(usize, Method, Vec<Sample>)> = Vec::new();
    for &size in &sizes {
        let requests = (BYTES_PER_RUN / size).clamp(MIN_REQUESTS, MAX_REQUESTS);
        let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); METHODS.len()];
        let pass = |samples: &mut Vec<Vec<Sample>>, round: usize, only: &[usize]| {
            // Rotate the order each round so drift in the machine's load hits every relay.
            for k in 0..METHODS.len() {
                let m = (k + round) % METHODS.len();
                if only.contains(&m) {
                    let s = run(METHODS[m], size, requests, &relay).expect("bench run");
                    samples[m].push(s);
                }
            }
        };
        let all: Vec<usize> = (0..METHODS.len()).collect();
        for round in 0..rounds {
            pass(&mut samples, round, &all);
        }
        for extra in 0..EXTRA_PASSES {
            let noisy: Vec<usize> = (0..METHODS.len())
                .filter(|&m| spread(&samples[m].iter().map(|s| s.rps).collect::<Vec<_>>()) > NOISY)
                .collect();
            if noisy.is_empty() {
                break;
            }
            for round in 0..rounds {
                pass(&mut samples, rounds + extra * rounds + round, &noisy);
            }
        }
        for (m, s) in samples.into_iter().enumerate() {
            eprintln!("{} {}: {} runs of {requests} requests", size_label(size), METHODS[m].name(), s.len());
            results.push((size, METHODS[m], s));
        }
    }
    println!("loadavg after: {}", load());
    println!();
    println!(
        "| response | relay | requests/s median (min–max) | switch threads µs/req | bench process µs/req | \
         kworker+ksoftirqd µs/req | process+kthreads µs/req | runs |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (size, method, samples) in &results {
        let col = |f: fn(&Sample) -> f64| median(samples.iter().map(f).collect());
        let rps: Vec<f64> = samples.iter().map(|s| s.rps).collect();
        let (min, max) = rps.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        println!(
            "| {} | {} | {:.0} ({:.0}–{:.0}) | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
            size_label(*size),
            method.name(),
            median(rps.clone()),
            min,
            max,
            col(|s| s.switch_us),
            col(|s| s.process_us),
            col(|s| s.kthreads_us),
            col(|s| s.process_us + s.kthreads_us),
            samples.len()
        );
    }
}
