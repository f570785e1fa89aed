//! VM configuration: a typed view of the keys the provider uses, property-string parsing
//! (`netN`, disks, `smbios1`, `memory`, `tags`) and the config update request.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::proxmox::lenient;

/// NIC models PVE knows (the default key of `netN`).
pub const NET_MODELS: &[&str] = &[
    "e1000",
    "e1000-82540em",
    "e1000-82544gc",
    "e1000-82545em",
    "e1000e",
    "i82551",
    "i82557b",
    "i82559er",
    "ne2k_isa",
    "ne2k_pci",
    "pcnet",
    "rtl8139",
    "virtio",
    "vmxnet3",
];

/// Splits a PVE tag list on `;`, `,` and whitespace, dropping empty entries.
pub fn split_tags(s: &str) -> Vec<String> {
    s.split(|c: char| c == ';' || c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Extracts the uuid of an `smbios1` value as capmox does (regex `(^|,)uuid=([0-9a-fA-F-]+)`)
/// and normalises it to lower-case 8-4-4-4-12 form. Returns `None` if absent or not a UUID.
pub fn smbios1_uuid(smbios1: &str) -> Option<String> {
    let raw = smbios1.split(',').find_map(|part| part.strip_prefix("uuid="))?;
    let matched: String = raw
        .chars()
        .take_while(|c| c.is_ascii_hexdigit() || *c == '-')
        .collect();
    let hex: String = matched
        .chars()
        .filter(|c| *c != '-')
        .collect::<String>()
        .to_ascii_lowercase();
    let dashed_ok = matched.len() == 36
        && matched.char_indices().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                c == '-'
            } else {
                c != '-'
            }
        });
    if hex.len() != 32 || !(dashed_ok || matched.len() == 32) {
        return None;
    }
    Some(format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ))
}

/// Parses a PVE size (`32G`, `10752M`, `4096` bytes, `1.5T`) into bytes (binary units).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim().trim_start_matches('+');
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        'T' | 't' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(mult);
    }
    let f = num.parse::<f64>().ok().filter(|f| f.is_finite() && *f >= 0.0)?;
    Some((f * mult as f64) as u64)
}

fn split_property(s: &str) -> impl Iterator<Item = (Option<&str>, &str)> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (Some(k), v),
            None => (None, p),
        })
}

/// A parsed `netN` value: `virtio=BC:24:11:..,bridge=vmbr0,tag=100,mtu=1500,queues=4,firewall=1`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetDevice {
    /// NIC model (`virtio`, `e1000`, ...).
    pub model: String,
    /// MAC address as stored (upper-case in PVE configs).
    pub mac: Option<String>,
    /// Bridge.
    pub bridge: Option<String>,
    /// VLAN tag.
    pub tag: Option<u16>,
    /// MTU (virtio only; 1 = bridge MTU).
    pub mtu: Option<u32>,
    /// Multiqueue count.
    pub queues: Option<u32>,
    /// Firewall enabled.
    pub firewall: Option<bool>,
    /// Link down.
    pub link_down: Option<bool>,
    /// Any other sub-keys, kept verbatim.
    pub extra: BTreeMap<String, String>,
}

impl NetDevice {
    /// A NIC of `model` on `bridge` without a MAC (PVE generates one).
    pub fn new(model: impl Into<String>, bridge: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            bridge: Some(bridge.into()),
            ..Default::default()
        }
    }

    /// Parses a `netN` property string.
    pub fn parse(s: &str) -> Option<Self> {
        let mut d = NetDevice::default();
        for (k, v) in split_property(s) {
            match k {
                None if NET_MODELS.contains(&v) => d.model = v.to_owned(),
                None => return None,
                Some(k) if NET_MODELS.contains(&k) => {
                    d.model = k.to_owned();
                    d.mac = Some(v.to_owned());
                }
                Some("model") => d.model = v.to_owned(),
                Some("macaddr") => d.mac = Some(v.to_owned()),
                Some("bridge") => d.bridge = Some(v.to_owned()),
                Some("tag") => d.tag = Some(v.parse().ok()?),
                Some("mtu") => d.mtu = Some(v.parse().ok()?),
                Some("queues") => d.queues = Some(v.parse().ok()?),
                Some("firewall") => d.firewall = lenient::value_to_bool(&Value::String(v.to_owned())),
                Some("link_down") => d.link_down = lenient::value_to_bool(&Value::String(v.to_owned())),
                Some(k) => {
                    d.extra.insert(k.to_owned(), v.to_owned());
                }
            }
        }
        if d.model.is_empty() { None } else { Some(d) }
    }

    /// Prints the property string in PVE's order: `model[=MAC]`, then the other keys sorted.
    pub fn to_property_string(&self) -> String {
        let mut out = match &self.mac {
            Some(mac) => format!("{}={mac}", self.model),
            None => self.model.clone(),
        };
        let mut rest: BTreeMap<&str, String> =
            self.extra.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        if let Some(b) = &self.bridge {
            rest.insert("bridge", b.clone());
        }
        if let Some(t) = self.tag {
            rest.insert("tag", t.to_string());
        }
        if let Some(m) = self.mtu {
            rest.insert("mtu", m.to_string());
        }
        if let Some(q) = self.queues {
            rest.insert("queues", q.to_string());
        }
        if let Some(f) = self.firewall {
            rest.insert("firewall", u8::from(f).to_string());
        }
        if let Some(l) = self.link_down {
            rest.insert("link_down", u8::from(l).to_string());
        }
        for (k, v) in rest {
            out.push(',');
            out.push_str(k);
            out.push('=');
            out.push_str(&v);
        }
        out
    }
}

impl fmt::Display for NetDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_property_string())
    }
}

/// A parsed disk value: `local-lvm:vm-101-disk-0,iothread=1,size=32G`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiskDevice {
    /// Volume id (`local-lvm:vm-101-disk-0`, `none`, `local:iso/x.iso`).
    pub volume: String,
    /// `size=` as written by PVE.
    pub size: Option<String>,
    /// `media=` (`disk` or `cdrom`).
    pub media: Option<String>,
    /// `format=`.
    pub format: Option<String>,
    /// Other sub-keys.
    pub extra: BTreeMap<String, String>,
}

impl DiskDevice {
    /// Parses a disk property string.
    pub fn parse(s: &str) -> Option<Self> {
        let mut d = DiskDevice::default();
        for (k, v) in split_property(s) {
            match k {
                None | Some("file") => d.volume = v.to_owned(),
                Some("size") => d.size = Some(v.to_owned()),
                Some("media") => d.media = Some(v.to_owned()),
                Some("format") => d.format = Some(v.to_owned()),
                Some(k) => {
                    d.extra.insert(k.to_owned(), v.to_owned());
                }
            }
        }
        if d.volume.is_empty() { None } else { Some(d) }
    }

    /// The size in bytes, if `size=` is present and valid.
    pub fn size_bytes(&self) -> Option<u64> {
        self.size.as_deref().and_then(parse_size)
    }

    /// Whether this is a CD-ROM drive.
    pub fn is_cdrom(&self) -> bool {
        self.media.as_deref() == Some("cdrom")
    }

    /// The storage part of the volume id (`local-lvm` of `local-lvm:vm-101-disk-0`).
    pub fn storage(&self) -> Option<&str> {
        self.volume.split_once(':').map(|(s, _)| s)
    }
}

/// Whether `key` names a disk slot (`scsiN`, `virtioN`, `sataN`, `ideN`, `efidisk0`, `tpmstate0`).
pub fn is_disk_key(key: &str) -> bool {
    let num = |p: &str, max: u32| {
        key.strip_prefix(p)
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| n <= max)
    };
    num("scsi", 30)
        || num("virtio", 15)
        || num("sata", 5)
        || num("ide", 3)
        || key == "efidisk0"
        || key == "tpmstate0"
}

/// `GET /nodes/{node}/qemu/{vmid}/config`: typed keys plus the raw map.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "BTreeMap<String, Value>")]
pub struct VmConfig {
    /// `name`.
    pub name: Option<String>,
    /// `smbios1` as stored.
    pub smbios1: Option<String>,
    /// The normalised uuid from `smbios1`.
    pub smbios_uuid: Option<String>,
    /// `netN` devices by index.
    pub nets: BTreeMap<u32, NetDevice>,
    /// Disks by key (`scsi0`, `ide0`, ...), CD-ROMs included.
    pub disks: BTreeMap<String, DiskDevice>,
    /// Tags, split.
    pub tags: Vec<String>,
    /// `boot`.
    pub boot: Option<String>,
    /// `sockets`.
    pub sockets: Option<u32>,
    /// `cores`.
    pub cores: Option<u32>,
    /// `memory` in MiB (`[current=]N`).
    pub memory: Option<u64>,
    /// `description`.
    pub description: Option<String>,
    /// `ide0` as stored (the NoCloud ISO slot).
    pub ide0: Option<String>,
    /// `digest`.
    pub digest: Option<String>,
    /// `lock`.
    pub lock: Option<String>,
    /// `template`.
    pub template: bool,
    /// `agent` enabled.
    pub agent: bool,
    /// Every key as PVE returned it.
    pub raw: BTreeMap<String, Value>,
}

impl From<BTreeMap<String, Value>> for VmConfig {
    fn from(raw: BTreeMap<String, Value>) -> Self {
        let s = |k: &str| raw.get(k).and_then(lenient::value_to_string);
        let u32_of = |k: &str| {
            raw.get(k)
                .and_then(lenient::value_to_u64)
                .and_then(|n| u32::try_from(n).ok())
        };
        let smbios1 = s("smbios1");
        let memory = s("memory").and_then(|m| {
            m.split(',')
                .find_map(|p| match p.split_once('=') {
                    Some(("current", v)) => Some(v.to_owned()),
                    None => Some(p.to_owned()),
                    _ => None,
                })
                .and_then(|v| v.trim().parse::<u64>().ok())
        });
        let agent = s("agent")
            .map(|a| {
                split_property(&a).any(|(k, v)| {
                    matches!(k, None | Some("enabled"))
                        && lenient::value_to_bool(&Value::String(v.to_owned())) == Some(true)
                })
            })
            .unwrap_or(false);
        let mut nets = BTreeMap::new();
        let mut disks = BTreeMap::new();
        for (k, v) in &raw {
            let Some(text) = lenient::value_to_string(v) else {
                continue;
            };
            if let Some(idx) = k.strip_prefix("net").and_then(|n| n.parse::<u32>().ok()) {
                if let Some(dev) = NetDevice::parse(&text) {
                    nets.insert(idx, dev);
                }
            } else if is_disk_key(k)
                && let Some(d) = DiskDevice::parse(&text)
            {
                disks.insert(k.clone(), d);
            }
        }
        Self {
            name: s("name"),
            smbios_uuid: smbios1.as_deref().and_then(smbios1_uuid),
            smbios1,
            nets,
            disks,
            tags: s("tags").as_deref().map(split_tags).unwrap_or_default(),
            boot: s("boot"),
            sockets: u32_of("sockets"),
            cores: u32_of("cores"),
            memory,
            description: s("description"),
            ide0: s("ide0"),
            digest: s("digest"),
            lock: s("lock"),
            template: raw
                .get("template")
                .and_then(lenient::value_to_bool)
                .unwrap_or(false),
            agent,
            raw,
        }
    }
}

/// `POST`/`PUT /nodes/{node}/qemu/{vmid}/config` parameters, built with typed setters.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct ConfigUpdate {
    params: BTreeMap<String, Value>,
}

impl ConfigUpdate {
    /// An empty update.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets any key to a raw JSON value.
    pub fn set(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.params.insert(key.into(), value.into());
        self
    }

    /// `cores`.
    pub fn cores(self, n: u32) -> Self {
        self.set("cores", n)
    }

    /// `sockets`.
    pub fn sockets(self, n: u32) -> Self {
        self.set("sockets", n)
    }

    /// `memory` in MiB (sent as a string, PVE 8.1+ property string).
    pub fn memory_mib(self, mib: u64) -> Self {
        self.set("memory", mib.to_string())
    }

    /// `name`.
    pub fn name(self, name: impl Into<String>) -> Self {
        self.set("name", name.into())
    }

    /// `description`.
    pub fn description(self, d: impl Into<String>) -> Self {
        self.set("description", d.into())
    }

    /// `net<idx>`.
    pub fn net(self, idx: u32, dev: &NetDevice) -> Self {
        self.set(format!("net{idx}"), dev.to_property_string())
    }

    /// `tags`, joined by `;`.
    pub fn tags<S: AsRef<str>>(self, tags: &[S]) -> Self {
        let joined = tags.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(";");
        self.set("tags", joined)
    }

    /// `ide0` (e.g. `local:iso/user-data-101.iso,media=cdrom` or `none,media=cdrom`).
    pub fn ide0(self, value: impl Into<String>) -> Self {
        self.set("ide0", value.into())
    }

    /// `boot` (e.g. `order=scsi0;ide0`).
    pub fn boot(self, value: impl Into<String>) -> Self {
        self.set("boot", value.into())
    }

    /// `delete`: keys to remove.
    pub fn delete<S: AsRef<str>>(self, keys: &[S]) -> Self {
        let joined = keys.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(",");
        self.set("delete", joined)
    }

    /// `digest`: fail with a conflict if the config changed since it was read.
    pub fn digest(self, digest: impl Into<String>) -> Self {
        self.set("digest", digest.into())
    }

    /// This update plus every parameter of `other` (`other` wins on a key both set).
    pub fn merge(mut self, other: ConfigUpdate) -> Self {
        self.params.extend(other.params);
        self
    }

    /// Whether the update sets a disk slot to a volume (not a CD-ROM), i.e. may allocate a disk.
    pub fn sets_disks(&self) -> bool {
        self.params
            .iter()
            .any(|(k, v)| is_disk_key(k) && v.as_str().is_some_and(|s| !s.contains("media=cdrom")))
    }

    /// Whether the update sets a NIC (`netN`); one without a MAC has Proxmox assign one.
    pub fn sets_nics(&self) -> bool {
        self.params.keys().any(|k| {
            k.strip_prefix("net")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
    }

    /// Whether no parameter is set (PVE rejects empty updates).
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// The parameters.
    pub fn params(&self) -> &BTreeMap<String, Value> {
        &self.params
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn smbios_uuid_parsing() {
        assert_eq!(
            smbios1_uuid("uuid=5B0E2F36-9A3C-4C8F-8E7A-1D2C3B4A5F60").as_deref(),
            Some("5b0e2f36-9a3c-4c8f-8e7a-1d2c3b4a5f60")
        );
        assert_eq!(
            smbios1_uuid("base64=1,uuid=5b0e2f36-9a3c-4c8f-8e7a-1d2c3b4a5f60,serial=abc").as_deref(),
            Some("5b0e2f36-9a3c-4c8f-8e7a-1d2c3b4a5f60")
        );
        assert_eq!(
            smbios1_uuid("uuid=5b0e2f369a3c4c8f8e7a1d2c3b4a5f60").as_deref(),
            Some("5b0e2f36-9a3c-4c8f-8e7a-1d2c3b4a5f60")
        );
        assert_eq!(
            smbios1_uuid("serial=uuid=5b0e2f36-9a3c-4c8f-8e7a-1d2c3b4a5f60"),
            None
        );
        assert_eq!(smbios1_uuid("uuid=xyz"), None);
        assert_eq!(smbios1_uuid("uuid=5b0e2f36-9a3c-4c8f-8e7a"), None);
        assert_eq!(smbios1_uuid("manufacturer=x"), None);
    }

    #[test]
    fn net_parsing_and_printing() {
        let n =
            NetDevice::parse("virtio=BC:24:11:5E:2A:7F,bridge=vmbr0,firewall=1,mtu=1500,tag=100,queues=4")
                .unwrap();
        assert_eq!(n.model, "virtio");
        assert_eq!(n.mac.as_deref(), Some("BC:24:11:5E:2A:7F"));
        assert_eq!(
            (n.bridge.as_deref(), n.tag, n.mtu, n.queues, n.firewall),
            (Some("vmbr0"), Some(100), Some(1500), Some(4), Some(true))
        );
        assert_eq!(
            n.to_property_string(),
            "virtio=BC:24:11:5E:2A:7F,bridge=vmbr0,firewall=1,mtu=1500,queues=4,tag=100"
        );
        let n = NetDevice::parse("model=e1000,macaddr=AA:BB:CC:DD:EE:FF,bridge=vmbr1,rate=10").unwrap();
        assert_eq!(n.model, "e1000");
        assert_eq!(n.mac.as_deref(), Some("AA:BB:CC:DD:EE:FF"));
        assert_eq!(n.extra.get("rate").map(String::as_str), Some("10"));
        let n = NetDevice::parse("virtio,bridge=vmbr0").unwrap();
        assert_eq!(n.mac, None);
        assert_eq!(
            NetDevice::new("virtio", "vmbr0").to_property_string(),
            "virtio,bridge=vmbr0"
        );
        assert!(NetDevice::parse("bridge=vmbr0").is_none());
        assert!(NetDevice::parse("foo").is_none());
        assert!(NetDevice::parse("virtio,tag=abc").is_none());
    }

    #[test]
    fn disk_parsing() {
        let d = DiskDevice::parse("local-lvm:vm-101-disk-0,iothread=1,size=32G").unwrap();
        assert_eq!(d.volume, "local-lvm:vm-101-disk-0");
        assert_eq!(d.storage(), Some("local-lvm"));
        assert_eq!(d.size_bytes(), Some(32 << 30));
        assert!(!d.is_cdrom());
        let d = DiskDevice::parse("file=local:iso/user-data-101.iso,media=cdrom").unwrap();
        assert!(d.is_cdrom());
        assert_eq!(d.volume, "local:iso/user-data-101.iso");
        assert_eq!(parse_size("10752M"), Some(10752 << 20));
        assert_eq!(parse_size("+1.5G"), Some(1_610_612_736));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("x"), None);
        assert!(
            is_disk_key("scsi30")
                && !is_disk_key("scsi31")
                && is_disk_key("efidisk0")
                && !is_disk_key("unused0")
                && !is_disk_key("scsihw")
        );
    }

    #[test]
    fn tags_split() {
        assert_eq!(split_tags("a;b,c d  ;;e"), vec!["a", "b", "c", "d", "e"]);
        assert!(split_tags("").is_empty());
    }

    #[test]
    fn vm_config_typed_view() {
        let c: VmConfig = serde_json::from_value(json!({
            "name": "capi-md-0", "smbios1": "uuid=5b0e2f36-9a3c-4c8f-8e7a-1d2c3b4a5f60",
            "net0": "virtio=BC:24:11:5E:2A:7F,bridge=vmbr0,tag=100", "net1": "e1000=AA:AA:AA:AA:AA:AA,bridge=vmbr1",
            "scsi0": "local-lvm:vm-101-disk-0,size=32G", "ide0": "local:iso/user-data-101.iso,media=cdrom",
            "ide2": "none,media=cdrom", "unused0": "local-lvm:vm-101-disk-1", "scsihw": "virtio-scsi-pci",
            "tags": "capmox;k8s", "boot": "order=scsi0;net0", "sockets": 1, "cores": "4", "memory": "4096",
            "description": "hello\nworld", "digest": "abc", "agent": "1", "template": 0, "cpulimit": "1.5"
        }))
        .unwrap();
        assert_eq!(c.name.as_deref(), Some("capi-md-0"));
        assert_eq!(
            c.smbios_uuid.as_deref(),
            Some("5b0e2f36-9a3c-4c8f-8e7a-1d2c3b4a5f60")
        );
        assert_eq!(c.nets.len(), 2);
        assert_eq!(c.nets[&0].tag, Some(100));
        assert_eq!(c.disks.keys().collect::<Vec<_>>(), vec!["ide0", "ide2", "scsi0"]);
        assert_eq!(c.disks["scsi0"].size_bytes(), Some(32 << 30));
        assert_eq!(c.tags, vec!["capmox", "k8s"]);
        assert_eq!((c.sockets, c.cores, c.memory), (Some(1), Some(4), Some(4096)));
        assert!(c.agent && !c.template);
        assert_eq!(c.ide0.as_deref(), Some("local:iso/user-data-101.iso,media=cdrom"));
        assert_eq!(c.raw.get("cpulimit"), Some(&json!("1.5")));

        let c: VmConfig = serde_json::from_value(
            json!({"memory": "current=2048,foo=1", "agent": "enabled=0,type=virtio", "template": 1}),
        )
        .unwrap();
        assert_eq!(c.memory, Some(2048));
        assert!(!c.agent && c.template);
        let c: VmConfig = serde_json::from_value(json!({"memory": 1024, "agent": 1})).unwrap();
        assert_eq!(c.memory, Some(1024));
        assert!(c.agent);
    }

    #[test]
    fn config_update_builder() {
        let u = ConfigUpdate::new()
            .cores(4)
            .sockets(1)
            .memory_mib(8192)
            .net(
                0,
                &NetDevice {
                    tag: Some(100),
                    ..NetDevice::new("virtio", "vmbr0")
                },
            )
            .tags(&["capi", "cluster-a"])
            .ide0("none,media=cdrom")
            .boot("order=scsi0;ide0")
            .delete(&["ide2", "net1"])
            .digest("d");
        assert_eq!(
            serde_json::to_value(&u).unwrap(),
            json!({"cores":4,"sockets":1,"memory":"8192","net0":"virtio,bridge=vmbr0,tag=100","tags":"capi;cluster-a",
                   "ide0":"none,media=cdrom","boot":"order=scsi0;ide0","delete":"ide2,net1","digest":"d"})
        );
        assert!(!u.is_empty() && ConfigUpdate::new().is_empty());
        assert!(!u.sets_disks());
        let u = u.merge(ConfigUpdate::new().set("scsi1", "local-lvm:4").cores(2));
        assert!(u.sets_disks());
        assert_eq!(u.params()["cores"], json!(2));
    }

    proptest::proptest! {
        #[test]
        fn net_roundtrip(
            model_idx in 0usize..NET_MODELS.len(),
            mac in proptest::option::of("([0-9A-F]{2}:){5}[0-9A-F]{2}"),
            bridge in proptest::option::of("vmbr[0-9]{1,3}"),
            tag in proptest::option::of(1u16..4095),
            mtu in proptest::option::of(1u32..65520),
            queues in proptest::option::of(0u32..64),
            firewall in proptest::option::of(proptest::bool::ANY),
        ) {
            let dev = NetDevice {
                model: NET_MODELS[model_idx].to_owned(),
                mac, bridge, tag, mtu, queues, firewall, link_down: None, extra: BTreeMap::new(),
            };
            let printed = dev.to_property_string();
            proptest::prop_assert_eq!(NetDevice::parse(&printed), Some(dev));
        }

        #[test]
        fn parsers_never_panic(s in "\\PC{0,60}") {
            let _ = NetDevice::parse(&s);
            let _ = DiskDevice::parse(&s);
            let _ = smbios1_uuid(&s);
            let _ = parse_size(&s);
            let _ = split_tags(&s);
        }
    }
}
