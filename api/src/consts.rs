//! Well-known names shared by the API, the controllers and the webhooks: group, finalizers, labels
//! and annotations (capmox v0.9 spellings).

/// API group of every kind in this crate.
pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// Finalizer on `ProxmoxCluster` objects.
pub const CLUSTER_FINALIZER: &str = "proxmoxcluster.infrastructure.cluster.x-k8s.io";
/// Finalizer on `ProxmoxMachine` objects.
pub const MACHINE_FINALIZER: &str = "proxmoxmachine.infrastructure.cluster.x-k8s.io";
/// Finalizer on credentials Secrets referenced by a `ProxmoxCluster`.
pub const SECRET_FINALIZER: &str = "proxmoxcluster.infrastructure.cluster.x-k8s.io/secret";

/// Label on every object of this provider (and on the CRDs).
pub const PROVIDER_LABEL: &str = "cluster.x-k8s.io/provider";
/// Value of [`PROVIDER_LABEL`].
pub const PROVIDER_NAME: &str = "infrastructure-proxmox";
/// CRD label naming the API versions served for the CAPI v1beta1 contract.
pub const CONTRACT_LABEL_V1BETA1: &str = "cluster.x-k8s.io/v1beta1";
/// CRD label naming the API versions served for the CAPI v1beta2 contract.
pub const CONTRACT_LABEL_V1BETA2: &str = "cluster.x-k8s.io/v1beta2";

/// Label with the name of the CAPI cluster an object belongs to.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// CAPI's label for sharding a management cluster across managers: a manager started with
/// `--watch-filter=<value>` reconciles only the objects carrying `<label>=<value>`.
pub const WATCH_FILTER_LABEL: &str = "cluster.x-k8s.io/watch-filter";
/// Label with the zone of IP pools, claims and machines.
pub const PROXMOX_ZONE_LABEL: &str = "topology.kubernetes.io/proxmox-zone";
/// Zone name used when none is given.
pub const DEFAULT_ZONE: &str = "default";

/// Annotation on created IP pools: `ipv4` or `ipv6`.
pub const IP_FAMILY_ANNOTATION: &str = "ipam.capmox.cluster.x-k8s.io/ip-family";
/// Annotation on IP pools with the metric of the default route.
pub const GATEWAY_METRIC_ANNOTATION: &str = "ipam.capmox.cluster.x-k8s.io/gateway-metric";
/// Legacy spelling of [`GATEWAY_METRIC_ANNOTATION`], still written and read.
pub const LEGACY_METRIC_ANNOTATION: &str = "metric";
/// Annotation on IPAddressClaims with the position of the pool on its NIC.
pub const POOL_REF_COUNTER_ANNOTATION: &str = "ipam.capmox.cluster.x-k8s.io/pool-ref-counter";
/// Annotation on IPAddressClaims for default pools (`"true"`).
pub const DEFAULT_GATEWAY_ANNOTATION: &str = "ipam.capmox.cluster.x-k8s.io/default-gateway";
/// Annotation keeping the hub object across a down- and up-conversion.
pub const CONVERSION_DATA_ANNOTATION: &str = "cluster.x-k8s.io/conversion-data";
/// Annotation/label pausing reconciliation of an object.
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";

/// Value of [`IP_FAMILY_ANNOTATION`] for IPv4 pools.
pub const IP_FAMILY_IPV4: &str = "ipv4";
/// Value of [`IP_FAMILY_ANNOTATION`] for IPv6 pools.
pub const IP_FAMILY_IPV6: &str = "ipv6";
/// Suffix of the IPv4 InClusterIPPool created for a cluster (`<cluster>-v4-icip`, `<cluster>-<zone>-v4-icip`).
pub const IPV4_POOL_SUFFIX: &str = "-v4-icip";
/// Suffix of the IPv6 InClusterIPPool created for a cluster.
pub const IPV6_POOL_SUFFIX: &str = "-v6-icip";

/// Event reason: an IP address status was recovered from existing IPAddress objects.
pub const EVENT_RECOVERED_IP_ADDRESS_STATUS: &str = "RecoveredIPAddressStatus";
/// Event reason: an IPAddress no longer belongs to any NIC.
pub const EVENT_ORPHANED_IP_ADDRESS: &str = "OrphanedIPAddress";
/// Name the controllers record events under.
pub const EVENT_RECORDER_NAME: &str = "proxmox-controller";

/// Prefix of every `providerID`.
pub const PROVIDER_ID_PREFIX: &str = "proxmox://";
