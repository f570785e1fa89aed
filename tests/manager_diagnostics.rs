//! The secured diagnostics endpoint, capmox's default: `/metrics` over HTTPS, every request
//! authenticated by a TokenReview of its bearer token and authorized by a SubjectAccessReview
//! (`get` on `/metrics`, granted by config/rbac's metrics-reader ClusterRole). Anonymous and
//! unknown callers get 401, authenticated callers without the role 403, bound ServiceAccounts
//! and cluster admins the metrics; answers are cached; `--tls-min-version` and a mounted
//! certificate apply; `--insecure-diagnostics` serves plain HTTP. Runs on the in-tree and the
//! real API server (ServiceAccount tokens from TokenRequests, RBAC objects through the API).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use capmox::cli::Cli;
use capmox::controllers::rbac;
use capmox::diagnostics::{MetricsSecurity, MetricsServer, ReviewSettings, SecureOptions};
use capmox::manager::{Manager, ManagerOptions, metrics_security};
use capmox::metrics::Metrics;
use capmox::webhooks::{TlsSettings, TlsVersion};
use clap::Parser;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::oneshot;

fn https(timeout: Duration) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The manager's certificate is self-signed, as controller-runtime's: skip verification like
    // capmox's ServiceMonitor (`insecureSkipVerify: true`).
    reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(timeout)
        .build()
        .unwrap()
}

async fn scrape(http: &reqwest::Client, addr: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    let mut req = http.get(format!("https://{addr}{path}"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

fn rand_suffix() -> String {
    format!("{:08x}", rand::random::<u32>())
}

async fn service_account(client: &kube::Client, ns: &str, name: &str) -> String {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let req = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let token = sas
        .create_token_request(name, &PostParams::default(), &req)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    // The real server's ServiceAccount authenticator reads from an informer: wait until it
    // knows the new account, so the manager's first (cached) review sees it.
    testenv::wait_for(30, "the token to authenticate", || {
        let api: Api<TokenReview> = Api::all(client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.clone()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        async move {
            let r = api.create(&PostParams::default(), &review).await.ok()?;
            r.status?.authenticated.filter(|a| *a).map(|_| ())
        }
    })
    .await;
    token
}

/// Waits until the RBAC authorizer (an informer on the real server) sees what was just bound.
async fn wait_allowed(client: &kube::Client, user: &str, groups: Vec<String>) {
    testenv::wait_for(30, "the role binding to take effect", || {
        let api: Api<SubjectAccessReview> = Api::all(client.clone());
        let sar = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.to_owned()),
                groups: Some(groups.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(rbac::METRICS_PATH.to_owned()),
                    verb: Some("get".to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        async move {
            let r = api.create(&PostParams::default(), &sar).await.ok()?;
            r.status?.allowed.then_some(())
        }
    })
    .await;
}

/// Binds config/rbac's metrics-reader ClusterRole (under a unique name) to `ns/sa`.
async fn grant_metrics(client: &kube::Client, ns: &str, sa: &str) {
    let name = format!("capmox-metrics-reader-{}", rand_suffix());
    let mut role: ClusterRole = rbac::metrics_reader_role();
    role.metadata.name = Some(name.clone());
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name,
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: sa.into(),
            namespace: Some(ns.into()),
            ..Subject::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    wait_allowed(
        client,
        &format!("system:serviceaccount:{ns}:{sa}"),
        vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated".into(),
        ],
    )
    .await;
}

async fn namespace(client: &kube::Client) -> String {
    let name = format!("diag-{}", rand_suffix());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    name
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_need_an_authenticated_and_authorized_caller() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = testenv::TestEnv::start().await.unwrap();
    env.install_crds(capmox_api::crd::all().unwrap()).await.unwrap();
    let client = env.client();
    let ns = namespace(&client).await;
    let reader = service_account(&client, &ns, "prometheus").await;
    let stranger = service_account(&client, &ns, "stranger").await;
    grant_metrics(&client, &ns, "prometheus").await;

    let manager = Manager::new(
        client.clone(),
        ManagerOptions {
            metrics_addr: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            metrics_security: MetricsSecurity::Secure(SecureOptions::default()),
            ..ManagerOptions::default()
        },
    )
    .await
    .unwrap();
    let addr = manager.metrics_addr().unwrap();
    let auth = manager.metrics_auth().expect("secure metrics have a reviewer");
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(manager.run(async move {
        let _ = stopped.await;
    }));
    let http = https(Duration::from_secs(15));
    testenv::wait_for(20, "the metrics server", || {
        let http = http.clone();
        async move { http.get(format!("https://{addr}/metrics")).send().await.ok() }
    })
    .await;

    // Anonymous, malformed and unknown credentials: 401, before any path is looked at.
    assert_eq!(
        scrape(&http, addr, "/metrics", None).await,
        (401, "Unauthorized\n".to_owned())
    );
    assert_eq!(scrape(&http, addr, "/nope", None).await.0, 401);
    let basic = http
        .get(format!("https://{addr}/metrics"))
        .basic_auth("admin", Some("admin"))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), 401);
    assert_eq!(scrape(&http, addr, "/metrics", Some("not-a-token")).await.0, 401);

    // Authenticated without the metrics-reader role: 403 naming the user.
    assert_eq!(
        scrape(&http, addr, "/metrics", Some(&stranger)).await,
        (
            403,
            format!("Authorization denied for user system:serviceaccount:{ns}:stranger\n")
        )
    );

    // Bound to the role: the metrics.
    let (status, body) = scrape(&http, addr, "/metrics", Some(&reader)).await;
    assert_eq!(status, 200, "{body}");
    // A family that is always there (the reconcile counters appear only after a first reconcile,
    // which on a real kube-apiserver may come after this scrape).
    assert!(body.contains("# TYPE capmox_leader gauge"), "{body}");
    assert!(body.contains("# EOF"), "{body}");
    // The role covers /metrics only.
    assert_eq!(scrape(&http, addr, "/debug/pprof/", Some(&reader)).await.0, 403);
    // A cluster admin (system:masters) may read anything; unknown paths are 404 for it.
    assert_eq!(
        scrape(&http, addr, "/metrics", Some(env.admin_token())).await.0,
        200
    );
    assert_eq!(
        scrape(&http, addr, "/nope", Some(env.admin_token())).await,
        (404, "404 page not found\n".to_owned())
    );

    // Answers are cached: scraping again costs no review.
    let before = auth.reviews_sent();
    for token in [&reader, &stranger, &reader] {
        scrape(&http, addr, "/metrics", Some(token)).await;
    }
    assert_eq!(scrape(&http, addr, "/metrics", Some("not-a-token")).await.0, 401);
    assert_eq!(auth.reviews_sent(), before, "cached answers were reviewed again");

    // Plain HTTP on the HTTPS port gets no metrics.
    let plain = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
        .get(format!("http://{addr}/metrics"))
        .send()
        .await;
    assert!(plain.map(|r| r.status() != 200).unwrap_or(true));

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(15), run)
        .await
        .expect("manager did not stop")
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_settings_and_a_mounted_certificate_apply() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = testenv::TestEnv::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let certs = testenv::certs::generate().unwrap();
    std::fs::write(dir.path().join("tls.crt"), &certs.serving_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &certs.serving_key_pem).unwrap();
    let security = MetricsSecurity::Secure(SecureOptions {
        tls: TlsSettings {
            min_version: TlsVersion::Tls13,
            cipher_suites: vec![],
        },
        cert_dir: Some(dir.path().to_path_buf()),
        review: ReviewSettings {
            token_ttl: Duration::ZERO,
            ..ReviewSettings::default()
        },
        ..SecureOptions::default()
    });
    let server = MetricsServer::bind("127.0.0.1:0".parse().unwrap(), &security, env.client())
        .await
        .unwrap();
    assert!(server.is_secure());
    let addr = server.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(Arc::new(Metrics::new()), async move {
        let _ = stopped.await;
    }));
    // The mounted certificate is served: a client trusting only its CA connects.
    let ca = reqwest::Certificate::from_pem(certs.ca_pem.as_bytes()).unwrap();
    let trusting = reqwest::Client::builder()
        .tls_certs_only([ca.clone()])
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let resp = trusting
        .get(format!("https://{addr}/metrics"))
        .bearer_auth(env.admin_token())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // --tls-min-version=VersionTLS13: a TLS 1.2 client is refused.
    let old = reqwest::Client::builder()
        .tls_certs_only([ca])
        .tls_version_max(reqwest::tls::Version::TLS_1_2)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    assert!(old.get(format!("https://{addr}/metrics")).send().await.is_err());
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[test]
fn command_line_selects_the_mode() {
    let parse = |args: &[&str]| {
        let mut all = vec!["capmox"];
        all.extend_from_slice(args);
        metrics_security(&Cli::parse_from(all)).unwrap()
    };
    // capmox's Deployment arguments: secure, self-signed.
    match parse(&["--diagnostics-address=:8443", "--insecure-diagnostics=false"]) {
        MetricsSecurity::Secure(o) => assert_eq!(o.cert_dir, None),
        other => panic!("{other:?}"),
    }
    assert_eq!(parse(&["--insecure-diagnostics=true"]), MetricsSecurity::Insecure);
    assert_eq!(parse(&["--insecure-diagnostics"]), MetricsSecurity::Insecure);
    match parse(&["--metrics-cert-path=/certs", "--tls-min-version=VersionTLS13"]) {
        MetricsSecurity::Secure(o) => {
            assert_eq!(o.cert_dir.as_deref(), Some(std::path::Path::new("/certs")));
            assert_eq!(o.tls.min_version, TlsVersion::Tls13);
        }
        other => panic!("{other:?}"),
    }
    match parse(&["--diagnostics-cert-dir=/c"]) {
        MetricsSecurity::Secure(o) => assert!(o.cert_dir.is_some()),
        other => panic!("{other:?}"),
    }
}
