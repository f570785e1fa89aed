//! Delegated authentication and authorization (what a component protecting its own endpoints
//! with the API server uses): TokenRequests for ServiceAccounts, TokenReviews of those tokens and
//! of the admin token, and SubjectAccessReviews decided by ClusterRoleBindings. Same answers on
//! the in-tree and the real server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        ..ObjectMeta::default()
    }
}

async fn review(client: &kube::Client, token: &str) -> Option<(String, Vec<String>)> {
    let r = Api::<TokenReview>::all(client.clone())
        .create(
            &PostParams::default(),
            &TokenReview {
                spec: TokenReviewSpec {
                    token: Some(token.to_owned()),
                    audiences: None,
                },
                ..TokenReview::default()
            },
        )
        .await
        .unwrap();
    let s = r.status.unwrap();
    if s.authenticated != Some(true) {
        return None;
    }
    let u = s.user.unwrap();
    Some((u.username.unwrap(), u.groups.unwrap_or_default()))
}

async fn allowed(
    client: &kube::Client,
    user: &str,
    groups: &[String],
    spec: SubjectAccessReviewSpec,
) -> bool {
    let spec = SubjectAccessReviewSpec {
        user: Some(user.to_owned()),
        groups: Some(groups.to_vec()),
        ..spec
    };
    Api::<SubjectAccessReview>::all(client.clone())
        .create(
            &PostParams::default(),
            &SubjectAccessReview {
                spec,
                ..SubjectAccessReview::default()
            },
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .allowed
}

fn non_resource(path: &str, verb: &str) -> SubjectAccessReviewSpec {
    SubjectAccessReviewSpec {
        non_resource_attributes: Some(NonResourceAttributes {
            path: Some(path.into()),
            verb: Some(verb.into()),
        }),
        ..SubjectAccessReviewSpec::default()
    }
}

fn resource(group: &str, resource: &str, verb: &str) -> SubjectAccessReviewSpec {
    SubjectAccessReviewSpec {
        resource_attributes: Some(ResourceAttributes {
            group: Some(group.into()),
            resource: Some(resource.into()),
            verb: Some(verb.into()),
            ..ResourceAttributes::default()
        }),
        ..SubjectAccessReviewSpec::default()
    }
}

#[tokio::test]
async fn service_account_tokens_are_reviewed_and_bindings_decide_access() {
    let env = testenv::TestEnv::start().await.unwrap();
    let c = env.client();
    let suffix = format!("{:08x}", rand::random::<u32>());
    let ns = format!("authn-{suffix}");
    Api::<Namespace>::all(c.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: meta(&ns),
                ..Namespace::default()
            },
        )
        .await
        .unwrap();
    let sas: Api<ServiceAccount> = Api::namespaced(c.clone(), &ns);
    sas.create(
        &PostParams::default(),
        &ServiceAccount {
            metadata: meta("scraper"),
            ..ServiceAccount::default()
        },
    )
    .await
    .unwrap();
    let req = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let token = sas
        .create_token_request("scraper", &PostParams::default(), &req)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    // A TokenRequest for a missing ServiceAccount is a 404.
    match sas
        .create_token_request("missing", &PostParams::default(), &req)
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 404),
        other => panic!("expected 404, got {other:?}"),
    }

    let user = format!("system:serviceaccount:{ns}:scraper");
    // The real server's authenticator reads ServiceAccounts from an informer.
    let (name, groups) = testenv::wait_for(30, "the token to authenticate", || {
        let c = c.clone();
        let token = token.clone();
        async move { review(&c, &token).await }
    })
    .await;
    assert_eq!(name, user);
    for g in [
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{ns}"),
        "system:authenticated".to_owned(),
    ] {
        assert!(groups.contains(&g), "{groups:?}");
    }
    assert_eq!(review(&c, "not-a-token").await, None);
    let (admin, admin_groups) = review(&c, env.admin_token()).await.unwrap();
    assert_eq!(admin, "testenv-admin");
    assert!(admin_groups.contains(&"system:masters".to_owned()));

    // Nothing bound yet: denied; system:masters: allowed.
    assert!(!allowed(&c, &user, &groups, non_resource("/metrics", "get")).await);
    assert!(allowed(&c, &admin, &admin_groups, non_resource("/metrics", "get")).await);

    let role = format!("metrics-{suffix}");
    Api::<ClusterRole>::all(c.clone())
        .create(
            &PostParams::default(),
            &ClusterRole {
                metadata: meta(&role),
                rules: Some(vec![
                    PolicyRule {
                        non_resource_urls: Some(vec!["/metrics".into()]),
                        verbs: vec!["get".into()],
                        ..PolicyRule::default()
                    },
                    PolicyRule {
                        api_groups: Some(vec!["".into()]),
                        resources: Some(vec!["configmaps".into()]),
                        verbs: vec!["list".into()],
                        ..PolicyRule::default()
                    },
                ]),
                ..ClusterRole::default()
            },
        )
        .await
        .unwrap();
    let bindings: Api<ClusterRoleBinding> = Api::all(c.clone());
    bindings
        .create(
            &PostParams::default(),
            &ClusterRoleBinding {
                metadata: meta(&role),
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "ClusterRole".into(),
                    name: role.clone(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: "scraper".into(),
                    namespace: Some(ns.clone()),
                    ..Subject::default()
                }]),
            },
        )
        .await
        .unwrap();
    // The real server's RBAC authorizer reads bindings from an informer.
    testenv::wait_for(30, "the binding to take effect", || {
        let (c, user, groups) = (c.clone(), user.clone(), groups.clone());
        async move {
            allowed(&c, &user, &groups, non_resource("/metrics", "get"))
                .await
                .then_some(())
        }
    })
    .await;
    assert!(!allowed(&c, &user, &groups, non_resource("/metrics", "post")).await);
    assert!(!allowed(&c, &user, &groups, non_resource("/debug/pprof/", "get")).await);
    // Every authenticated user may read the health and discovery URLs (bootstrap policy).
    assert!(allowed(&c, &user, &groups, non_resource("/healthz", "get")).await);
    assert!(allowed(&c, &user, &groups, non_resource("/apis/apps/v1", "get")).await);
    assert!(!allowed(&c, &user, &groups, non_resource("/healthz", "post")).await);
    assert!(allowed(&c, &user, &groups, resource("", "configmaps", "list")).await);
    assert!(!allowed(&c, &user, &groups, resource("", "secrets", "list")).await);
    assert!(!allowed(&c, &user, &groups, resource("", "configmaps", "delete")).await);
    // Another account in the namespace is not bound.
    assert!(
        !allowed(
            &c,
            &format!("system:serviceaccount:{ns}:other"),
            &groups,
            non_resource("/metrics", "get")
        )
        .await
    );

    // A deleted ServiceAccount's token no longer authenticates.
    sas.delete("scraper", &DeleteParams::default()).await.unwrap();
    testenv::wait_for(30, "the deleted account's token to be refused", || {
        let c = c.clone();
        let token = token.clone();
        async move { review(&c, &token).await.is_none().then_some(()) }
    })
    .await;
}
