//! The property-string formats of the VM config keys, as the 8.4 and 9.1 schemas describe them
//! (`format` objects of `POST /nodes/{node}/qemu`; `tests/schema_sweep.rs` compares them).

use super::{Sub, Ty, alias, dkey, dkey_opt, key_alias, opt, req};

/// `net[n]`.
pub const NET: &[Sub] = &[
    opt("bridge", Ty::Bridge),
    key_alias("e1000", "macaddr", "model"),
    key_alias("e1000-82540em", "macaddr", "model"),
    key_alias("e1000-82544gc", "macaddr", "model"),
    key_alias("e1000-82545em", "macaddr", "model"),
    key_alias("e1000e", "macaddr", "model"),
    opt("firewall", Ty::Bool),
    key_alias("i82551", "macaddr", "model"),
    key_alias("i82557b", "macaddr", "model"),
    key_alias("i82559er", "macaddr", "model"),
    opt("link_down", Ty::Bool),
    opt("macaddr", Ty::Mac),
    dkey(
        "model",
        Ty::Enum(&[
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
        ]),
    ),
    opt("mtu", Ty::Int(Some(1), Some(65520))),
    key_alias("ne2k_isa", "macaddr", "model"),
    key_alias("ne2k_pci", "macaddr", "model"),
    key_alias("pcnet", "macaddr", "model"),
    opt("queues", Ty::Int(Some(0), Some(64))),
    opt("rate", Ty::Num(Some(0.0), None)),
    key_alias("rtl8139", "macaddr", "model"),
    opt("tag", Ty::Int(Some(1), Some(4094))),
    opt("trunks", Ty::Pattern(r#"(?:\d+(?:-\d+)?(?:;\d+(?:-\d+)?)*)"#)),
    key_alias("virtio", "macaddr", "model"),
    key_alias("vmxnet3", "macaddr", "model"),
];

/// `ide[n]`.
pub const IDE: &[Sub] = &[
    opt("aio", Ty::Enum(&["native", "threads", "io_uring"])),
    opt("backup", Ty::Bool),
    opt("bps", Ty::Int(None, None)),
    opt("bps_max_length", Ty::Int(Some(1), None)),
    opt("bps_rd", Ty::Int(None, None)),
    alias("bps_rd_length", "bps_rd_max_length"),
    opt("bps_rd_max_length", Ty::Int(Some(1), None)),
    opt("bps_wr", Ty::Int(None, None)),
    alias("bps_wr_length", "bps_wr_max_length"),
    opt("bps_wr_max_length", Ty::Int(Some(1), None)),
    opt(
        "cache",
        Ty::Enum(&["none", "writethrough", "writeback", "unsafe", "directsync"]),
    ),
    opt("cyls", Ty::Int(None, None)).until91(),
    opt("detect_zeroes", Ty::Bool),
    opt("discard", Ty::Enum(&["ignore", "on"])),
    dkey("file", Ty::Volume),
    opt(
        "format",
        Ty::Enum(&["raw", "qcow", "qed", "qcow2", "vmdk", "cloop"]),
    ),
    opt("heads", Ty::Int(None, None)).until91(),
    opt("import-from", Ty::Str),
    opt("iops", Ty::Int(None, None)),
    opt("iops_max", Ty::Int(None, None)),
    opt("iops_max_length", Ty::Int(Some(1), None)),
    opt("iops_rd", Ty::Int(None, None)),
    alias("iops_rd_length", "iops_rd_max_length"),
    opt("iops_rd_max", Ty::Int(None, None)),
    opt("iops_rd_max_length", Ty::Int(Some(1), None)),
    opt("iops_wr", Ty::Int(None, None)),
    alias("iops_wr_length", "iops_wr_max_length"),
    opt("iops_wr_max", Ty::Int(None, None)),
    opt("iops_wr_max_length", Ty::Int(Some(1), None)),
    opt("mbps", Ty::Num(None, None)),
    opt("mbps_max", Ty::Num(None, None)),
    opt("mbps_rd", Ty::Num(None, None)),
    opt("mbps_rd_max", Ty::Num(None, None)),
    opt("mbps_wr", Ty::Num(None, None)),
    opt("mbps_wr_max", Ty::Num(None, None)),
    opt("media", Ty::Enum(&["cdrom", "disk"])),
    opt("model", Ty::Urlencoded).max_len(120),
    opt("replicate", Ty::Bool),
    opt("rerror", Ty::Enum(&["ignore", "report", "stop"])),
    opt("secs", Ty::Int(None, None)).until91(),
    opt("serial", Ty::Urlencoded).max_len(60),
    opt("shared", Ty::Bool),
    opt("size", Ty::Size),
    opt("snapshot", Ty::Bool),
    opt("ssd", Ty::Bool),
    opt("trans", Ty::Enum(&["none", "lba", "auto"])).until91(),
    alias("volume", "file"),
    opt("werror", Ty::Enum(&["enospc", "ignore", "report", "stop"])),
    opt("wwn", Ty::Pattern(r#"(?:^(0x)[0-9a-fA-F]{16})"#)),
];

/// `sata[n]`.
pub const SATA: &[Sub] = &[
    opt("aio", Ty::Enum(&["native", "threads", "io_uring"])),
    opt("backup", Ty::Bool),
    opt("bps", Ty::Int(None, None)),
    opt("bps_max_length", Ty::Int(Some(1), None)),
    opt("bps_rd", Ty::Int(None, None)),
    alias("bps_rd_length", "bps_rd_max_length"),
    opt("bps_rd_max_length", Ty::Int(Some(1), None)),
    opt("bps_wr", Ty::Int(None, None)),
    alias("bps_wr_length", "bps_wr_max_length"),
    opt("bps_wr_max_length", Ty::Int(Some(1), None)),
    opt(
        "cache",
        Ty::Enum(&["none", "writethrough", "writeback", "unsafe", "directsync"]),
    ),
    opt("cyls", Ty::Int(None, None)).until91(),
    opt("detect_zeroes", Ty::Bool),
    opt("discard", Ty::Enum(&["ignore", "on"])),
    dkey("file", Ty::Volume),
    opt(
        "format",
        Ty::Enum(&["raw", "qcow", "qed", "qcow2", "vmdk", "cloop"]),
    ),
    opt("heads", Ty::Int(None, None)).until91(),
    opt("import-from", Ty::Str),
    opt("iops", Ty::Int(None, None)),
    opt("iops_max", Ty::Int(None, None)),
    opt("iops_max_length", Ty::Int(Some(1), None)),
    opt("iops_rd", Ty::Int(None, None)),
    alias("iops_rd_length", "iops_rd_max_length"),
    opt("iops_rd_max", Ty::Int(None, None)),
    opt("iops_rd_max_length", Ty::Int(Some(1), None)),
    opt("iops_wr", Ty::Int(None, None)),
    alias("iops_wr_length", "iops_wr_max_length"),
    opt("iops_wr_max", Ty::Int(None, None)),
    opt("iops_wr_max_length", Ty::Int(Some(1), None)),
    opt("mbps", Ty::Num(None, None)),
    opt("mbps_max", Ty::Num(None, None)),
    opt("mbps_rd", Ty::Num(None, None)),
    opt("mbps_rd_max", Ty::Num(None, None)),
    opt("mbps_wr", Ty::Num(None, None)),
    opt("mbps_wr_max", Ty::Num(None, None)),
    opt("media", Ty::Enum(&["cdrom", "disk"])),
    opt("replicate", Ty::Bool),
    opt("rerror", Ty::Enum(&["ignore", "report", "stop"])),
    opt("secs", Ty::Int(None, None)).until91(),
    opt("serial", Ty::Urlencoded).max_len(60),
    opt("shared", Ty::Bool),
    opt("size", Ty::Size),
    opt("snapshot", Ty::Bool),
    opt("ssd", Ty::Bool),
    opt("trans", Ty::Enum(&["none", "lba", "auto"])).until91(),
    alias("volume", "file"),
    opt("werror", Ty::Enum(&["enospc", "ignore", "report", "stop"])),
    opt("wwn", Ty::Pattern(r#"(?:^(0x)[0-9a-fA-F]{16})"#)),
];

/// `scsi[n]`.
pub const SCSI: &[Sub] = &[
    opt("aio", Ty::Enum(&["native", "threads", "io_uring"])),
    opt("backup", Ty::Bool),
    opt("bps", Ty::Int(None, None)),
    opt("bps_max_length", Ty::Int(Some(1), None)),
    opt("bps_rd", Ty::Int(None, None)),
    alias("bps_rd_length", "bps_rd_max_length"),
    opt("bps_rd_max_length", Ty::Int(Some(1), None)),
    opt("bps_wr", Ty::Int(None, None)),
    alias("bps_wr_length", "bps_wr_max_length"),
    opt("bps_wr_max_length", Ty::Int(Some(1), None)),
    opt(
        "cache",
        Ty::Enum(&["none", "writethrough", "writeback", "unsafe", "directsync"]),
    ),
    opt("cyls", Ty::Int(None, None)).until91(),
    opt("detect_zeroes", Ty::Bool),
    opt("discard", Ty::Enum(&["ignore", "on"])),
    dkey("file", Ty::Volume),
    opt(
        "format",
        Ty::Enum(&["raw", "qcow", "qed", "qcow2", "vmdk", "cloop"]),
    ),
    opt("heads", Ty::Int(None, None)).until91(),
    opt("import-from", Ty::Str),
    opt("iops", Ty::Int(None, None)),
    opt("iops_max", Ty::Int(None, None)),
    opt("iops_max_length", Ty::Int(Some(1), None)),
    opt("iops_rd", Ty::Int(None, None)),
    alias("iops_rd_length", "iops_rd_max_length"),
    opt("iops_rd_max", Ty::Int(None, None)),
    opt("iops_rd_max_length", Ty::Int(Some(1), None)),
    opt("iops_wr", Ty::Int(None, None)),
    alias("iops_wr_length", "iops_wr_max_length"),
    opt("iops_wr_max", Ty::Int(None, None)),
    opt("iops_wr_max_length", Ty::Int(Some(1), None)),
    opt("iothread", Ty::Bool),
    opt("mbps", Ty::Num(None, None)),
    opt("mbps_max", Ty::Num(None, None)),
    opt("mbps_rd", Ty::Num(None, None)),
    opt("mbps_rd_max", Ty::Num(None, None)),
    opt("mbps_wr", Ty::Num(None, None)),
    opt("mbps_wr_max", Ty::Num(None, None)),
    opt("media", Ty::Enum(&["cdrom", "disk"])),
    opt("product", Ty::Pattern(r#"[A-Za-z0-9\-_\s]{0,16}"#)),
    opt("queues", Ty::Int(Some(2), None)),
    opt("replicate", Ty::Bool),
    opt("rerror", Ty::Enum(&["ignore", "report", "stop"])),
    opt("ro", Ty::Bool),
    opt("scsiblock", Ty::Bool),
    opt("secs", Ty::Int(None, None)).until91(),
    opt("serial", Ty::Urlencoded).max_len(60),
    opt("shared", Ty::Bool),
    opt("size", Ty::Size),
    opt("snapshot", Ty::Bool),
    opt("ssd", Ty::Bool),
    opt("trans", Ty::Enum(&["none", "lba", "auto"])).until91(),
    opt("vendor", Ty::Pattern(r#"[A-Za-z0-9\-_\s]{0,8}"#)),
    alias("volume", "file"),
    opt("werror", Ty::Enum(&["enospc", "ignore", "report", "stop"])),
    opt("wwn", Ty::Pattern(r#"(?:^(0x)[0-9a-fA-F]{16})"#)),
];

/// `virtio[n]`.
pub const VIRTIO: &[Sub] = &[
    opt("aio", Ty::Enum(&["native", "threads", "io_uring"])),
    opt("backup", Ty::Bool),
    opt("bps", Ty::Int(None, None)),
    opt("bps_max_length", Ty::Int(Some(1), None)),
    opt("bps_rd", Ty::Int(None, None)),
    alias("bps_rd_length", "bps_rd_max_length"),
    opt("bps_rd_max_length", Ty::Int(Some(1), None)),
    opt("bps_wr", Ty::Int(None, None)),
    alias("bps_wr_length", "bps_wr_max_length"),
    opt("bps_wr_max_length", Ty::Int(Some(1), None)),
    opt(
        "cache",
        Ty::Enum(&["none", "writethrough", "writeback", "unsafe", "directsync"]),
    ),
    opt("cyls", Ty::Int(None, None)).until91(),
    opt("detect_zeroes", Ty::Bool),
    opt("discard", Ty::Enum(&["ignore", "on"])),
    dkey("file", Ty::Volume),
    opt(
        "format",
        Ty::Enum(&["raw", "qcow", "qed", "qcow2", "vmdk", "cloop"]),
    ),
    opt("heads", Ty::Int(None, None)).until91(),
    opt("import-from", Ty::Str),
    opt("iops", Ty::Int(None, None)),
    opt("iops_max", Ty::Int(None, None)),
    opt("iops_max_length", Ty::Int(Some(1), None)),
    opt("iops_rd", Ty::Int(None, None)),
    alias("iops_rd_length", "iops_rd_max_length"),
    opt("iops_rd_max", Ty::Int(None, None)),
    opt("iops_rd_max_length", Ty::Int(Some(1), None)),
    opt("iops_wr", Ty::Int(None, None)),
    alias("iops_wr_length", "iops_wr_max_length"),
    opt("iops_wr_max", Ty::Int(None, None)),
    opt("iops_wr_max_length", Ty::Int(Some(1), None)),
    opt("iothread", Ty::Bool),
    opt("mbps", Ty::Num(None, None)),
    opt("mbps_max", Ty::Num(None, None)),
    opt("mbps_rd", Ty::Num(None, None)),
    opt("mbps_rd_max", Ty::Num(None, None)),
    opt("mbps_wr", Ty::Num(None, None)),
    opt("mbps_wr_max", Ty::Num(None, None)),
    opt("media", Ty::Enum(&["cdrom", "disk"])),
    opt("replicate", Ty::Bool),
    opt("rerror", Ty::Enum(&["ignore", "report", "stop"])),
    opt("ro", Ty::Bool),
    opt("secs", Ty::Int(None, None)).until91(),
    opt("serial", Ty::Urlencoded).max_len(60),
    opt("shared", Ty::Bool),
    opt("size", Ty::Size),
    opt("snapshot", Ty::Bool),
    opt("trans", Ty::Enum(&["none", "lba", "auto"])).until91(),
    alias("volume", "file"),
    opt("werror", Ty::Enum(&["enospc", "ignore", "report", "stop"])),
];

/// `efidisk0`.
pub const EFIDISK: &[Sub] = &[
    opt("efitype", Ty::Enum(&["2m", "4m"])),
    dkey("file", Ty::Volume),
    opt(
        "format",
        Ty::Enum(&["raw", "qcow", "qed", "qcow2", "vmdk", "cloop"]),
    ),
    opt("import-from", Ty::Str),
    opt("ms-cert", Ty::Enum(&["2011", "2023", "2023w", "2023k"])),
    opt("pre-enrolled-keys", Ty::Bool),
    opt("size", Ty::Size),
    alias("volume", "file"),
];

/// `tpmstate0`.
pub const TPMSTATE: &[Sub] = &[
    dkey("file", Ty::Volume),
    opt("format", Ty::Enum(&["raw", "qcow2", "vmdk"])).since91(),
    opt("import-from", Ty::Str),
    opt("size", Ty::Size),
    opt("version", Ty::Enum(&["v1.2", "v2.0"])),
    alias("volume", "file"),
];

/// `unused[n]`.
pub const UNUSED: &[Sub] = &[dkey("file", Ty::Volume), alias("volume", "file")];

/// `agent`.
pub const AGENT: &[Sub] = &[
    dkey("enabled", Ty::Bool),
    opt("freeze-fs", Ty::Bool).since91(),
    opt("freeze-fs-on-backup", Ty::Bool).until91(),
    alias("freeze-fs-on-backup", "freeze-fs").since91(),
    opt("fstrim_cloned_disks", Ty::Bool),
    alias("guest-fsfreeze", "freeze-fs").since91(),
    opt("type", Ty::Enum(&["virtio", "isa"])),
];

/// `memory`.
pub const MEMORY: &[Sub] = &[dkey("current", Ty::Int(Some(16), None))];

/// `machine`.
pub const MACHINE: &[Sub] = &[
    opt("aw-bits", Ty::Num(Some(32.0), Some(64.0))).since91(),
    opt("enable-s3", Ty::Bool),
    opt("enable-s4", Ty::Bool),
    dkey_opt("type", Ty::Pattern(r#"(pc|pc(-i440fx)?-\d+(\.\d+)+(\+pve\d+)?(\.pxe)?|q35|pc-q35-\d+(\.\d+)+(\+pve\d+)?(\.pxe)?|virt(?:-\d+(\.\d+)+)?(\+pve\d+)?)"#)).max_len(40),
    opt("viommu", Ty::Enum(&["intel", "virtio"])),
];

/// `vga`.
pub const VGA: &[Sub] = &[
    opt("clipboard", Ty::Enum(&["vnc"])),
    opt("memory", Ty::Int(Some(4), Some(512))),
    dkey_opt(
        "type",
        Ty::Enum(&[
            "cirrus",
            "qxl",
            "qxl2",
            "qxl3",
            "qxl4",
            "none",
            "serial0",
            "serial1",
            "serial2",
            "serial3",
            "std",
            "virtio",
            "virtio-gl",
            "vmware",
        ]),
    ),
];

/// `usb[n]`.
pub const USB: &[Sub] = &[
    dkey_opt(
        "host",
        Ty::Pattern(
            r#"(?:(?:(?:(?:(0x)?([0-9A-Fa-f]{4}):(0x)?([0-9A-Fa-f]{4})))|(?:(?:(\d+)\-(\d+(\.\d+)*)))|[Ss][Pp][Ii][Cc][Ee]))"#,
        ),
    ),
    opt("mapping", Ty::ConfigId),
    opt("usb3", Ty::Bool),
];

/// `virtiofs[n]`.
pub const VIRTIOFS: &[Sub] = &[
    opt("cache", Ty::Enum(&["auto", "always", "metadata", "never"])),
    opt("direct-io", Ty::Bool),
    dkey("dirid", Ty::ConfigId),
    opt("expose-acl", Ty::Bool),
    opt("expose-xattr", Ty::Bool),
];

/// `numa[n]`.
pub const NUMA: &[Sub] = &[
    req("cpus", Ty::Pattern(r#"(?:\d+(?:-\d+)?(?:;\d+(?:-\d+)?)*)"#)),
    opt("hostnodes", Ty::Pattern(r#"(?:\d+(?:-\d+)?(?:;\d+(?:-\d+)?)*)"#)),
    opt("memory", Ty::Num(None, None)),
    opt("policy", Ty::Enum(&["preferred", "bind", "interleave"])),
];

/// `audio0`.
pub const AUDIO: &[Sub] = &[
    req("device", Ty::Enum(&["ich9-intel-hda", "intel-hda", "AC97"])),
    opt("driver", Ty::Enum(&["spice", "none"])),
];

/// `spice_enhancements`.
pub const SPICE: &[Sub] = &[
    opt("foldersharing", Ty::Bool),
    opt("videostreaming", Ty::Enum(&["off", "all", "filter"])),
];

/// `ivshmem`.
pub const IVSHMEM: &[Sub] = &[
    opt("name", Ty::Pattern(r#"[a-zA-Z0-9\-]+"#)),
    req("size", Ty::Int(Some(1), None)),
];
