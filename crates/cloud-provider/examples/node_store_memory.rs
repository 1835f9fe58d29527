//! How much memory a store of 1000 Nodes holds, and its peak during a re-list, for two stores:
//! kube-runtime's reflector store (`kube::runtime::reflector::store::Writer`, the one the
//! informer uses) and a plain `HashMap<String, Arc<Node>>` that takes the watched objects in
//! without cloning them (what the informer kept before). The Nodes are what a kubelet registers
//! on a Hetzner server, stripped as the Node cache strips them.
//!
//! ```text
//! cargo run --release -p cloud-provider --example node_store_memory
//! ```
//!
//! `docs/architecture.md` quotes its output.

// A measuring program: its report is what it prints, and a fixture that does not decode is a
// bug of the program.
#![allow(clippy::print_stdout, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};

use k8s_openapi::api::core::v1::{Node, NodeStatus};
use kube::ResourceExt;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;

const NODES: usize = 1000;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

/// Counts the bytes allocated and not yet freed, and the most at once.
struct Counting;

fn record(delta: isize) {
    let now = LIVE.fetch_add(delta, Ordering::Relaxed) + delta;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn size(layout: Layout) -> isize {
    isize::try_from(layout.size()).unwrap_or(isize::MAX)
}

// An allocation meter forwards to the system allocator; that is all the unsafe code here.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(size(layout));
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(size(layout));
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        record(-size(layout));
        // SAFETY: as above; `ptr` came from `System` through this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(isize::try_from(new_size).unwrap_or(isize::MAX) - size(layout));
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Node `i` as a kubelet on a Hetzner server registers it (after the cloud node controller
/// initialised it), stripped as the Node cache stores it.
fn node(i: usize, generation: usize) -> Node {
    let name = format!("pool-cx22-{i:04}");
    let mut node: Node = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": name,
            "uid": format!("6f1c2a7e-{generation:04}-4b1e-9c3d-{i:012}"),
            "resourceVersion": format!("{}", 1_000_000 + generation * NODES + i),
            "creationTimestamp": "2026-11-30T08:12:45Z",
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/instance-type": "cx22",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "cx22",
                "topology.kubernetes.io/region": "fsn1",
                "topology.kubernetes.io/zone": "fsn1-dc14",
                "instance.hetzner.cloud/provided-by": "cloud",
                "csi.hetzner.cloud/location": "fsn1",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "flannel.alpha.coreos.com/backend-data": "null",
                "flannel.alpha.coreos.com/backend-type": "host-gw",
                "flannel.alpha.coreos.com/kube-subnet-manager": "true",
                "flannel.alpha.coreos.com/public-ip": format!("10.0.{}.{}", i / 250, i % 250 + 2),
            },
            "managedFields": [{
                "manager": "kubelet",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-11-30T08:12:45Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:conditions": {}, "f:images": {}}},
            }],
        },
        "spec": {
            "podCIDR": format!("10.244.{}.0/24", i % 256),
            "podCIDRs": [format!("10.244.{}.0/24", i % 256)],
            "providerID": format!("hcloud://{}", 40_000_000 + i),
        },
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": format!("10.0.{}.{}", i / 250, i % 250 + 2)},
                {"type": "ExternalIP", "address": format!("95.217.{}.{}", i / 250, i % 250 + 2)},
                {"type": "Hostname", "address": name},
            ],
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
                condition("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
            ],
            "capacity": {"cpu": "2", "memory": "3911996Ki", "pods": "110", "ephemeral-storage": "39937312Ki"},
            "allocatable": {"cpu": "2", "memory": "3809596Ki", "pods": "110", "ephemeral-storage": "36806226321"},
            "nodeInfo": {
                "architecture": "amd64", "bootID": "5b0e", "containerRuntimeVersion": "containerd://2.1.4",
                "kernelVersion": "6.12.48", "kubeProxyVersion": "", "kubeletVersion": "v1.37.2",
                "machineID": "0d3c", "operatingSystem": "linux", "osImage": "Debian GNU/Linux 13 (trixie)",
                "systemUUID": "0d3c",
            },
        },
    }))
    .expect("a valid Node");
    // As the Node cache's strip: no managed fields; of the status only addresses and conditions.
    node.metadata.managed_fields = None;
    if let Some(status) = node.status.take() {
        node.status = Some(NodeStatus {
            addresses: status.addresses,
            conditions: status.conditions,
            ..NodeStatus::default()
        });
    }
    node
}

fn condition(kind: &str, status: &str, reason: &str, message: &str) -> serde_json::Value {
    serde_json::json!({
        "type": kind, "status": status, "reason": reason, "message": message,
        "lastHeartbeatTime": "2026-12-01T10:02:11Z", "lastTransitionTime": "2026-11-30T08:13:05Z",
    })
}

/// Bytes held now beyond `base`, and the most held beyond it since the last reset.
fn held(base: isize) -> (isize, isize) {
    (
        LIVE.load(Ordering::Relaxed) - base,
        PEAK.load(Ordering::Relaxed) - base,
    )
}

fn reset_peak() -> isize {
    let now = LIVE.load(Ordering::Relaxed);
    PEAK.store(now, Ordering::Relaxed);
    now
}

/// A list of every Node into kube-runtime's store, then a re-list of them all.
fn reflector_store() -> (isize, isize) {
    let base = reset_peak();
    let mut writer: Writer<Node> = Writer::default();
    let store = writer.as_reader();
    for generation in 0..2 {
        writer.apply_watcher_event(&Event::Init);
        for i in 0..NODES {
            // The event owns the decoded object; the store keeps its own clone.
            writer.apply_watcher_event(&Event::InitApply(node(i, generation)));
        }
        writer.apply_watcher_event(&Event::InitDone);
    }
    assert_eq!(store.state().len(), NODES);
    let (now, peak) = held(base);
    drop((writer, store));
    (now, peak)
}

/// The same into a map keyed by name that takes each object in.
fn lean_store() -> (isize, isize) {
    let base = reset_peak();
    let mut store: HashMap<String, Arc<Node>> = HashMap::new();
    for generation in 0..2 {
        let mut relist = HashMap::new();
        for i in 0..NODES {
            let node = node(i, generation);
            relist.insert(node.name_any(), Arc::new(node));
        }
        store = relist;
    }
    assert_eq!(store.len(), NODES);
    let (now, peak) = held(base);
    drop(store);
    (now, peak)
}

fn main() {
    let kib = |bytes: isize| bytes as f64 / 1024.0;
    let (reflector_held, reflector_peak) = reflector_store();
    let (lean_held, lean_peak) = lean_store();
    println!("{NODES} stripped Nodes: held after a re-list / peak during it");
    println!(
        "  kube-runtime reflector store: {:.0} KiB / {:.0} KiB",
        kib(reflector_held),
        kib(reflector_peak)
    );
    println!(
        "  map by name, objects moved in: {:.0} KiB / {:.0} KiB",
        kib(lean_held),
        kib(lean_peak)
    );
    println!(
        "  difference: {:.0} KiB held ({:.1} %), {:.0} KiB at the peak",
        kib(reflector_held - lean_held),
        100.0 * (reflector_held - lean_held) as f64 / lean_held as f64,
        kib(reflector_peak - lean_peak)
    );
}
