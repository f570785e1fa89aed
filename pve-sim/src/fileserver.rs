//! A loopback HTTP file server for tests and demos: what `download-url` fetches from. It serves
//! the files it was given (`GET /<name>`: 200 with `Content-Length`, anything else 404) and can
//! hold a response after its first `n` bytes until told to go on, so a test can look at a
//! download in flight without sleeping.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

#[derive(Default)]
struct Files {
    files: HashMap<String, Vec<u8>>,
    /// Hold every response after this many body bytes until released.
    hold_after: Option<usize>,
    requests: Vec<String>,
}

/// The server; it stops when dropped.
pub struct FileServer {
    addr: SocketAddr,
    files: Arc<Mutex<Files>>,
    release: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(m: &Mutex<Files>) -> std::sync::MutexGuard<'_, Files> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl FileServer {
    /// Starts serving on `127.0.0.1:<free port>`.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let files = Arc::new(Mutex::new(Files::default()));
        let release = Arc::new(Notify::new());
        let (f, r) = (files.clone(), release.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, f.clone(), r.clone()));
            }
        });
        Ok(Self {
            addr,
            files,
            release,
            task,
        })
    }

    /// Serves `data` at `/<name>`.
    pub fn put(&self, name: &str, data: Vec<u8>) {
        lock(&self.files).files.insert(name.to_owned(), data);
    }

    /// The URL of `/<name>`.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/{name}", self.addr)
    }

    /// The paths requested so far.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.files).requests.clone()
    }

    /// Holds every later response after its first `bytes` body bytes until [`Self::release`].
    pub fn hold_after(&self, bytes: usize) {
        lock(&self.files).hold_after = Some(bytes);
    }

    /// Lets held responses go on (and stops holding).
    pub fn release(&self) {
        lock(&self.files).hold_after = None;
        self.release.notify_waiters();
    }
}

async fn serve(mut stream: TcpStream, files: Arc<Mutex<Files>>, release: Arc<Notify>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > 64 << 10 {
            return;
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let (body, hold) = {
        let mut f = lock(&files);
        f.requests.push(path.clone());
        (f.files.get(path.trim_start_matches('/')).cloned(), f.hold_after)
    };
    let Some(body) = body else {
        let _ = stream
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await;
        return;
    };
    let header = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if stream.write_all(header.as_bytes()).await.is_err() {
        return;
    }
    let first = hold.unwrap_or(body.len()).min(body.len());
    if stream.write_all(&body[..first]).await.is_err() || stream.flush().await.is_err() {
        return;
    }
    if first < body.len() {
        let notified = release.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if lock(&files).hold_after.is_some() {
            notified.await;
        }
        let _ = stream.write_all(&body[first..]).await;
    }
    let _ = stream.shutdown().await;
}

/// A minimal qcow2 image: the header's magic, version 3 and a virtual size of `size` bytes,
/// padded to `len` bytes (what `download-url` and `import-from` read of it).
pub fn qcow2_image(size: u64, len: usize) -> Vec<u8> {
    let mut data = b"QFI\xfb\0\0\0\x03".to_vec();
    data.resize(24, 0);
    data.extend_from_slice(&size.to_be_bytes());
    data.resize(len.max(32), 0);
    data
}
