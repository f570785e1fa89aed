//! `POST /nodes/{node}/storage/{storage}/download-url` (`download` task), as pve-storage's
//! `API2/Storage/Status.pm` `download_url` and pve-common's `PVE::Tools::download_file_from_url`
//! do it (identical in 8.4 and 9.1): synchronous checks of the storage (file based, configured
//! for the content type) and of the file name's extension, then a worker that logs what PVE's
//! `wget --progress=dot:giga` run prints — one progress line per 32 MiB, with the percentage when
//! the length is known — verifies the checksum and the image's format, and only then puts the
//! file in place (a failed or interrupted download leaves nothing).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;

use super::storage::normalise_name;
use super::{Ctx, HandlerResult, Reply, check_node};
use crate::error::ApiError;
use crate::params::Params;
use crate::state::{Cluster, SimState, Volume};
use crate::tasks::{self, TaskRun, TaskSpec, Worker, log_line, now_epoch};

/// What wget's `dot:giga` style puts on one line (32 dots of 1 MiB).
const LINE_BYTES: u64 = 32 << 20;
/// The largest file pve-sim keeps (it holds files in memory).
const MAX_BYTES: u64 = 256 << 20;

/// Storage types with a file system path (`$scfg->{path}` in pve-storage).
pub fn file_based(kind: &str) -> bool {
    matches!(kind, "dir" | "nfs" | "cifs" | "cephfs" | "btrfs" | "glusterfs")
}

/// The mount point of a file storage (`local` is `/var/lib/vz`).
pub fn storage_root(storage: &str) -> String {
    if storage == "local" {
        "/var/lib/vz".to_owned()
    } else {
        format!("/mnt/pve/{storage}")
    }
}

/// The path of a file volume (`local:import/x.qcow2` → `/var/lib/vz/import/x.qcow2`).
pub fn volume_path(volid: &str) -> String {
    let (storage, rel) = volid.split_once(':').unwrap_or(("", volid));
    let root = storage_root(storage);
    match rel.split_once('/') {
        Some(("iso", f)) => format!("{root}/template/iso/{f}"),
        Some(("vztmpl", f)) => format!("{root}/template/cache/{f}"),
        Some(("import", f)) => format!("{root}/import/{f}"),
        _ => format!("{root}/{rel}"),
    }
}

/// The directory and format of a file of `content` named `filename`, as the handler checks them
/// (`Err`: the parameter exception PVE raises).
fn placement(content: &str, filename: &str) -> Result<(&'static str, String), ApiError> {
    let lower = filename.to_ascii_lowercase();
    match content {
        "iso" if lower.ends_with(".iso") || lower.ends_with(".img") => Ok(("iso", "iso".into())),
        "iso" => Err(ApiError::param("filename", "wrong file extension")),
        "vztmpl"
            if [".tar.gz", ".tar.xz", ".tar.zst", ".tar.bz2"]
                .iter()
                .any(|e| lower.ends_with(e)) =>
        {
            Ok(("vztmpl", "tgz".into()))
        }
        "vztmpl" => Err(ApiError::param("filename", "wrong file extension")),
        _ => {
            // `SAFE_CHAR_CLASS_RE+UPLOAD_IMPORT_EXT_RE_1$` (case-sensitive).
            let ext = ["ova", "qcow2", "raw", "vmdk"]
                .into_iter()
                .find(|e| filename.len() > e.len() + 1 && filename.ends_with(&format!(".{e}")));
            ext.map(|e| ("import", e.to_owned()))
                .ok_or_else(|| ApiError::param("filename", "invalid filename or wrong extension"))
        }
    }
}

/// `POST /nodes/{node}/storage/{storage}/download-url`.
pub fn download_url(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let name = p.str("storage").unwrap_or_default();
    let content = p.str("content").unwrap_or_default();
    let url = p.str("url").unwrap_or_default();
    let filename = normalise_name(p.str("filename").unwrap_or_default().trim_end_matches('\n'));
    let checksum = p
        .str("checksum")
        .filter(|c| !c.is_empty())
        .zip(p.str("checksum-algorithm"));
    let verify = p.bool("verify-certificates").unwrap_or(true);
    let compression = p.str("compression");
    ctx.state.with(|c| {
        let st = c
            .storage_on(&node, &name)
            .cloned()
            .ok_or_else(|| ApiError::server(format!("storage '{name}' does not exist")))?;
        if !file_based(&st.kind) {
            return Err(ApiError::server(format!(
                "can't upload to storage type '{}', not a file based storage!",
                st.kind
            )));
        }
        if !st.allows(&content) {
            return Err(ApiError::server(format!(
                "storage '{name}' is not configured for content-type '{content}'"
            )));
        }
        let (dir, format) = placement(&content, &filename)?;
        let volid = format!("{name}:{dir}/{filename}");
        let job = Download {
            url: url.clone(),
            volid,
            dest: String::new(),
            content: content.clone(),
            format,
            checksum: checksum.clone(),
            verify,
            compression: compression.clone(),
            scope: (st.scope(&node), st.name.clone()),
        };
        let spec = TaskSpec {
            node: node.clone(),
            kind: "download",
            id: filename.clone(),
            user: ctx.user.clone(),
            latency_key: "download".into(),
            log: Vec::new(),
        };
        let state = ctx.state.clone();
        let upid = tasks::start_worker(&ctx.state, c, spec, move |upid| -> Worker {
            Box::pin(job.run(state, upid))
        });
        Ok(Reply::data(json!(upid)))
    })
}

/// One download's parameters.
struct Download {
    url: String,
    volid: String,
    dest: String,
    content: String,
    format: String,
    checksum: Option<(String, String)>,
    verify: bool,
    compression: Option<String>,
    scope: (String, String),
}

impl Download {
    /// The worker: what `download_file_from_url` does.
    async fn run(mut self, state: SimState, upid: String) -> Result<TaskRun, String> {
        let log = |line: String| log_line(&state, &upid, line);
        self.dest = volume_path(&self.volid);
        if self.compression.is_some() {
            if self.content != "iso" {
                return Err(format!("decompression not supported for {}", self.content));
            }
            return Err("pve-sim: decompression of downloads is not simulated".into());
        }
        log(format!("downloading {} to {}", self.url, self.dest));
        let existing = state.with(|c| {
            c.volumes
                .get(&self.scope)
                .and_then(|m| m.get(&self.volid))
                .map(|v| v.data.clone())
        });
        if let Some(data) = existing {
            let Some((expected, algorithm)) = &self.checksum else {
                return Err(format!("refusing to override existing file '{}'", self.dest));
            };
            let got = digest(algorithm, &data)?;
            if got.eq_ignore_ascii_case(expected) {
                log("calculating checksum of existing file...OK, got correct file already, no need to download".into());
                return Ok(Box::new(|_: &mut Cluster| Ok(Vec::new())));
            }
            log("calculating checksum of existing file...".into());
            return Err(format!(
                "checksum mismatch: got '{got}' != expect '{expected}', aborting"
            ));
        }
        let pid = state.with(|c| c.tasks.get(&upid).map_or(0, |t| t.pid));
        let tmp = format!("{}.tmp_dwnl.{pid}", self.dest);
        let data = self.fetch(&tmp, &log).await?;
        if let Some((expected, algorithm)) = &self.checksum {
            let got = digest(algorithm, &data)?;
            if got.eq_ignore_ascii_case(expected) {
                log("calculating checksum...OK, checksum verified".into());
            } else {
                log("calculating checksum...".into());
                return Err(format!("checksum mismatch: got '{got}' != expect '{expected}'"));
            }
        }
        if !valid_image(&self.format, &data) {
            return Err("failed to verify file: failed to query file information with qemu-img".into());
        }
        let Self {
            url,
            volid,
            dest,
            content,
            format,
            scope,
            ..
        } = self;
        Ok(Box::new(move |c: &mut Cluster| {
            c.volumes.entry(scope).or_default().insert(
                volid.clone(),
                Volume {
                    volid,
                    content,
                    format,
                    data,
                    ctime: now_epoch(),
                },
            );
            Ok(vec![format!("download of '{url}' to '{dest}' finished")])
        }))
    }

    /// The `wget` run: its output lines, and the bytes (`Err`: `run_command`'s failure).
    async fn fetch(&self, tmp: &str, log: &impl Fn(String)) -> Result<Vec<u8>, String> {
        let failed = |code: u8| {
            format!(
                "download failed: command 'wget --progress=dot:giga -O {tmp} {}{}' failed: exit code {code}",
                self.url,
                if self.verify {
                    ""
                } else {
                    " --no-check-certificate"
                }
            )
        };
        log(format!("--{}--  {}", wget_time(), self.url));
        let target = reqwest::Url::parse(&self.url).map_err(|_| {
            log(format!("{}: Invalid URL.", self.url));
            failed(1)
        })?;
        let host = target.host_str().unwrap_or_default().to_owned();
        let port = target.port_or_known_default().unwrap_or(80);
        let client = reqwest::Client::builder()
            .tls_danger_accept_invalid_certs(!self.verify)
            .build()
            .map_err(|_| failed(1))?;
        let mut resp = match client.get(target).send().await {
            Ok(r) => r,
            Err(e) => {
                let why = if e.is_connect() {
                    "Connection refused."
                } else {
                    "Network is unreachable."
                };
                log(format!("Connecting to {host}:{port}... failed: {why}"));
                return Err(failed(4));
            }
        };
        log(format!("Connecting to {host}:{port}... connected."));
        let status = resp.status();
        let reason = status.canonical_reason().unwrap_or("");
        log(format!(
            "HTTP request sent, awaiting response... {} {reason}",
            status.as_u16()
        ));
        if !status.is_success() {
            log(format!("{} ERROR {}: {reason}.", wget_time(), status.as_u16()));
            return Err(failed(8));
        }
        let kind = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/octet-stream")
            .to_owned();
        let length = resp.content_length();
        log(match length {
            Some(n) => format!("Length: {n} ({}) [{kind}]", human(n)),
            None => format!("Length: unspecified [{kind}]"),
        });
        log(format!("Saving to: '{tmp}'"));
        log(String::new());
        let started = Instant::now();
        let mut data = Vec::new();
        let mut line_start = 0u64;
        loop {
            let chunk = match resp.chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(_) => return Err(failed(4)),
            };
            data.extend_from_slice(&chunk);
            let total = data.len() as u64;
            if total > MAX_BYTES {
                return Err(failed(3));
            }
            while total - line_start >= LINE_BYTES {
                line_start += LINE_BYTES;
                log(progress_line(
                    line_start - LINE_BYTES,
                    LINE_BYTES,
                    line_start,
                    length,
                    false,
                    started,
                ));
            }
        }
        let total = data.len() as u64;
        log(progress_line(
            line_start,
            total - line_start,
            total,
            length,
            true,
            started,
        ));
        log(String::new());
        let secs = started.elapsed().as_secs_f64().max(0.001);
        log(format!(
            "{} ({:.1} MB/s) - '{tmp}' saved [{total}/{}]",
            wget_time(),
            total as f64 / secs / 1e6,
            length.unwrap_or(total)
        ));
        log(String::new());
        Ok(data)
    }
}

/// One line of wget's `dot:giga` progress: the offset in KiB, a dot per MiB in groups of
/// eight, the percentage (with a known length) and the speed, with the total time on the last.
fn progress_line(
    offset: u64,
    bytes: u64,
    done: u64,
    length: Option<u64>,
    last: bool,
    started: Instant,
) -> String {
    let dots = usize::try_from(bytes >> 20).unwrap_or(32).min(32);
    let mut bar = String::new();
    for i in 0..32 {
        if i > 0 && i % 8 == 0 {
            bar.push(' ');
        }
        bar.push(if i < dots { '.' } else { ' ' });
    }
    let pct = length
        .filter(|l| *l > 0)
        .map(|l| format!("{:>3}%", (done.saturating_mul(100) / l).min(100)))
        .unwrap_or_default();
    let secs = started.elapsed().as_secs_f64().max(0.001);
    let speed = format!("{:.1}M", bytes as f64 / secs / f64::from(1u32 << 20));
    let tail = if last {
        format!("{speed}={secs:.1}s")
    } else {
        format!("{speed} 0s")
    };
    format!("{:>6}K {bar} {pct} {tail}", offset >> 10)
}

/// A size as wget shows it in `Length:` (`1.5M`, `583K`, `612`).
fn human(n: u64) -> String {
    let units = [(1u64 << 30, 'G'), (1 << 20, 'M'), (1 << 10, 'K')];
    for (size, unit) in units {
        if n >= size {
            return format!("{:.1}{unit}", n as f64 / size as f64);
        }
    }
    n.to_string()
}

/// wget's timestamp (`2026-05-02 12:00:00`, UTC here).
fn wget_time() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rest = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// The hex digest of `data` with one of the algorithms of `checksum-algorithm`.
pub fn digest(algorithm: &str, data: &[u8]) -> Result<String, String> {
    use sha2::Digest;
    Ok(match algorithm {
        "md5" => format!("{:x}", md5::Md5::digest(data)),
        "sha1" => format!("{:x}", sha1::Sha1::digest(data)),
        "sha224" => format!("{:x}", sha2::Sha224::digest(data)),
        "sha256" => format!("{:x}", sha2::Sha256::digest(data)),
        "sha384" => format!("{:x}", sha2::Sha384::digest(data)),
        "sha512" => format!("{:x}", sha2::Sha512::digest(data)),
        other => return Err(format!("unknown checksum algorithm '{other}'")),
    })
}

/// Whether `qemu-img info -f <format>` would read the file (pve-storage's `file_size_info` on an
/// untrusted image): qcow2 and vmdk need their headers; raw and OVA archives are taken as they
/// are.
pub fn valid_image(format: &str, data: &[u8]) -> bool {
    match format {
        "qcow2" => data.starts_with(b"QFI\xfb"),
        "vmdk" => data.starts_with(b"KDMV") || data.starts_with(b"# Disk DescriptorFile"),
        _ => true,
    }
}

/// The virtual size of an image file: a qcow2's header field, else its length.
pub fn virtual_size(format: &str, data: &[u8]) -> u64 {
    if format == "qcow2"
        && let Some(b) = data.get(24..32)
    {
        let mut size = [0u8; 8];
        size.copy_from_slice(b);
        return u64::from_be_bytes(size);
    }
    data.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths() {
        assert_eq!(volume_path("local:import/a.qcow2"), "/var/lib/vz/import/a.qcow2");
        assert_eq!(volume_path("nfs1:iso/a.iso"), "/mnt/pve/nfs1/template/iso/a.iso");
        assert!(placement("import", "noble.qcow2").is_ok());
        assert!(placement("import", "noble.img").is_err());
        assert!(placement("import", ".qcow2").is_err());
        assert!(placement("iso", "x.ISO").is_ok());
    }

    #[test]
    fn digests_and_images() {
        assert_eq!(
            digest("sha256", b"abc").unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(digest("md5", b"").unwrap(), "d41d8cd98f00b204e9800998ecf8427e");
        let mut qcow = b"QFI\xfb\0\0\0\x03".to_vec();
        qcow.resize(24, 0);
        qcow.extend_from_slice(&(2u64 << 30).to_be_bytes());
        assert!(valid_image("qcow2", &qcow));
        assert!(!valid_image("qcow2", b"plain"));
        assert_eq!(virtual_size("qcow2", &qcow), 2 << 30);
        assert_eq!(virtual_size("raw", b"1234"), 4);
    }

    #[test]
    fn progress_lines_look_like_wget() {
        let l = progress_line(
            0,
            LINE_BYTES,
            LINE_BYTES,
            Some(4 * LINE_BYTES),
            false,
            Instant::now(),
        );
        assert!(
            l.starts_with("     0K ........ ........ ........ ........  25% "),
            "{l}"
        );
        let last = progress_line(
            LINE_BYTES,
            3 << 20,
            LINE_BYTES + (3 << 20),
            None,
            true,
            Instant::now(),
        );
        assert!(last.starts_with(" 32768K ...      "), "{last}");
        assert!(last.contains('='));
        assert_eq!(human(1536), "1.5K");
        assert_eq!(wget_time().len(), 19);
    }
}
