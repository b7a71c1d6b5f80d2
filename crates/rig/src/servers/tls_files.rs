//! TLS material for a lab or benchmark, made with the `openssl` command so that every server
//! gets the same: a self-signed certificate (ECDSA P-256 or RSA-2048) for one DNS name, its key
//! (mode 600), the two in one PEM (HAProxy's `crt`), and a set of session-ticket keys written
//! in HAProxy's format (base64 lines, which Locus reads too) and in NGINX's (80 raw bytes).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::error::RigError;
use crate::programs::require_program;

/// The kind of key a certificate carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertKind {
    /// ECDSA on P-256 (what most sites serve today).
    EcdsaP256,
    /// RSA with a 2,048-bit key.
    Rsa2048,
}

impl CertKind {
    /// Its name in tables and JSON: `ecdsa-p256`, `rsa-2048`.
    pub fn name(self) -> &'static str {
        match self {
            CertKind::EcdsaP256 => "ecdsa-p256",
            CertKind::Rsa2048 => "rsa-2048",
        }
    }

    fn newkey(self) -> &'static [&'static str] {
        match self {
            CertKind::EcdsaP256 => &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
            CertKind::Rsa2048 => &["-newkey", "rsa:2048"],
        }
    }
}

impl std::str::FromStr for CertKind {
    type Err = String;
    fn from_str(s: &str) -> Result<CertKind, String> {
        match s {
            "ecdsa" | "ecdsa-p256" => Ok(CertKind::EcdsaP256),
            "rsa" | "rsa-2048" => Ok(CertKind::Rsa2048),
            _ => Err(format!("unknown certificate kind `{s}`: use ecdsa or rsa")),
        }
    }
}

/// A certificate's files.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub kind: CertKind,
    /// The DNS name it is for (what clients ask for with SNI and check).
    pub name: String,
    /// The certificate (PEM): also what clients trust.
    pub cert: PathBuf,
    /// Its private key (PEM, mode 600).
    pub key: PathBuf,
    /// Certificate then key in one PEM (mode 600), as HAProxy's `crt` takes them.
    pub bundle: PathBuf,
    /// Three session-ticket keys, 80 bytes each, base64 a line (HAProxy's `tls-ticket-keys`
    /// format; the Locus switch and node read it too).
    pub ticket_keys: PathBuf,
    /// The same middle key (the one HAProxy and Locus seal with) as NGINX's raw 80-byte file.
    pub ticket_key_nginx: PathBuf,
}

/// Write a `kind` certificate for `name`, valid ten years, and ticket keys into `dir`.
pub fn write_tls_files(dir: &Path, kind: CertKind, name: &str) -> Result<TlsFiles, RigError> {
    let openssl = require_program("openssl", "openssl")?;
    std::fs::create_dir_all(dir).map_err(|e| RigError::io(dir, e))?;
    let stem = kind.name();
    let (cert, key) = (dir.join(format!("{stem}.crt")), dir.join(format!("{stem}.key")));
    let mut cmd = Command::new(&openssl);
    cmd.args(["req", "-x509", "-nodes", "-days", "3650"]).args(kind.newkey());
    cmd.arg("-keyout").arg(&key).arg("-out").arg(&cert);
    cmd.args(["-subj", &format!("/CN={name}"), "-addext", &format!("subjectAltName=DNS:{name}")]);
    // An end-entity certificate: OpenSSL's default extensions would make it a CA, which
    // webpki (rustls) refuses to accept as a server's own certificate.
    cmd.args(["-addext", "basicConstraints=critical,CA:FALSE", "-addext", "extendedKeyUsage=serverAuth"]);
    let out = cmd.output().map_err(|e| command_error(e.to_string()))?;
    if !out.status.success() {
        return Err(command_error(String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    let read = |p: &Path| std::fs::read(p).map_err(|e| RigError::io(p, e));
    let (cert_pem, key_pem) = (read(&cert)?, read(&key)?);
    write_private(&key, &key_pem)?;
    let bundle = dir.join(format!("{stem}.pem"));
    write_private(&bundle, &[cert_pem, key_pem].concat())?;
    let raw = read_random(3 * 80)?;
    let lines: String = raw.chunks(80).map(|k| format!("{}\n", STANDARD.encode(k))).collect();
    let ticket_keys = dir.join("ticket-keys.txt");
    write_private(&ticket_keys, lines.as_bytes())?;
    let ticket_key_nginx = dir.join("ticket-key.bin");
    write_private(&ticket_key_nginx, &raw[80..160])?;
    Ok(TlsFiles { kind, name: name.to_string(), cert, key, bundle, ticket_keys, ticket_key_nginx })
}

fn command_error(message: String) -> RigError {
    RigError::Command { command: "openssl req -x509".into(), message }
}

/// Write `bytes` to `path`, readable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), RigError> {
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| RigError::io(path, e))
}

fn read_random(n: usize) -> Result<Vec<u8>, RigError> {
    use std::io::Read;
    let path = Path::new("/dev/urandom");
    let mut buf = vec![0u8; n];
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut buf)).map_err(|e| RigError::io(path, e))?;
    Ok(buf)
}
