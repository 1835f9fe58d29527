//! The fixed catalog: locations, server types, load balancer types and system images.

use chrono::{DateTime, TimeZone, Utc};

use crate::input::IdOrName;
use crate::model::{Image, LbType, Location, ServerType};

/// Everything that is not created by users.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// Locations.
    pub locations: Vec<Location>,
    /// Server types.
    pub server_types: Vec<ServerType>,
    /// Load balancer types.
    pub lb_types: Vec<LbType>,
    /// System images.
    pub images: Vec<Image>,
}

const EU: &[&str] = &["fsn1", "nbg1", "hel1"];
const ALL: &[&str] = &["fsn1", "nbg1", "hel1", "ash", "hil", "sin"];

#[allow(clippy::too_many_arguments)]
fn loc(
    id: i64,
    name: &'static str,
    description: &'static str,
    country: &'static str,
    city: &'static str,
    latitude: f64,
    longitude: f64,
    network_zone: &'static str,
) -> Location {
    Location {
        id,
        name,
        description,
        country,
        city,
        latitude,
        longitude,
        network_zone,
    }
}

#[allow(clippy::too_many_arguments)]
fn st(
    id: i64,
    name: &'static str,
    cores: u32,
    memory: f64,
    disk: u32,
    cpu_type: &'static str,
    architecture: &'static str,
    locations: &'static [&'static str],
    price_monthly: f64,
) -> ServerType {
    let (description, category) = match (name, cpu_type, architecture) {
        (_, "dedicated", _) => (name, "Dedicated vCPU"),
        (_, _, "arm") => (name, "Cost-Optimized"),
        _ if name.starts_with("cpx") => (name, "Regular Purpose"),
        _ => (name, "Cost-Optimized"),
    };
    ServerType {
        id,
        name,
        description,
        cores,
        memory,
        disk,
        cpu_type,
        architecture,
        category,
        locations,
        deprecated: false,
        price_monthly,
    }
}

fn image_created() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 4, 25, 12, 0, 0)
        .single()
        .unwrap_or_default()
}

impl Default for Catalog {
    fn default() -> Self {
        let locations = vec![
            loc(
                1,
                "fsn1",
                "Falkenstein DC Park 1",
                "DE",
                "Falkenstein",
                50.47612,
                12.370071,
                "eu-central",
            ),
            loc(
                2,
                "nbg1",
                "Nuremberg DC Park 1",
                "DE",
                "Nuremberg",
                49.452102,
                11.076665,
                "eu-central",
            ),
            loc(
                3,
                "hel1",
                "Helsinki DC Park 1",
                "FI",
                "Helsinki",
                60.169855,
                24.938379,
                "eu-central",
            ),
            loc(
                4,
                "ash",
                "Ashburn, VA",
                "US",
                "Ashburn, VA",
                39.045821,
                -77.487073,
                "us-east",
            ),
            loc(
                5,
                "hil",
                "Hillsboro, OR",
                "US",
                "Hillsboro, OR",
                45.54222,
                -122.951924,
                "us-west",
            ),
            loc(
                6,
                "sin",
                "Singapore",
                "SG",
                "Singapore",
                1.283333,
                103.833333,
                "ap-southeast",
            ),
        ];
        let mut cx22 = st(104, "cx22", 2, 4.0, 40, "shared", "x86", EU, 3.79);
        cx22.deprecated = true;
        let server_types = vec![
            cx22,
            st(114, "cx23", 2, 4.0, 40, "shared", "x86", EU, 3.49),
            st(115, "cx33", 4, 8.0, 80, "shared", "x86", EU, 5.49),
            st(116, "cx43", 8, 16.0, 160, "shared", "x86", EU, 9.49),
            st(117, "cx53", 16, 32.0, 320, "shared", "x86", EU, 17.49),
            st(45, "cax11", 2, 4.0, 40, "shared", "arm", EU, 3.79),
            st(93, "cax21", 4, 8.0, 80, "shared", "arm", EU, 6.49),
            st(94, "cax31", 8, 16.0, 160, "shared", "arm", EU, 12.49),
            st(95, "cax41", 16, 32.0, 320, "shared", "arm", EU, 24.49),
            st(108, "cpx22", 2, 4.0, 80, "shared", "x86", ALL, 7.99),
            st(109, "cpx32", 4, 8.0, 160, "shared", "x86", ALL, 13.99),
            st(110, "cpx42", 8, 16.0, 320, "shared", "x86", ALL, 25.49),
            st(96, "ccx13", 2, 8.0, 80, "dedicated", "x86", ALL, 12.49),
            st(97, "ccx23", 4, 16.0, 160, "dedicated", "x86", ALL, 24.49),
            st(98, "ccx33", 8, 32.0, 240, "dedicated", "x86", ALL, 48.49),
        ];
        let lb_types = vec![
            LbType {
                id: 1,
                name: "lb11",
                description: "LB11",
                max_connections: 10_000,
                max_services: 5,
                max_targets: 25,
                max_assigned_certificates: 10,
                price_monthly: 5.39,
            },
            LbType {
                id: 2,
                name: "lb21",
                description: "LB21",
                max_connections: 20_000,
                max_services: 15,
                max_targets: 75,
                max_assigned_certificates: 25,
                price_monthly: 16.40,
            },
            LbType {
                id: 3,
                name: "lb31",
                description: "LB31",
                max_connections: 40_000,
                max_services: 30,
                max_targets: 150,
                max_assigned_certificates: 50,
                price_monthly: 32.90,
            },
        ];
        let systems: [(&'static str, &'static str, &'static str, &'static str); 7] = [
            ("ubuntu-22.04", "Ubuntu 22.04", "ubuntu", "22.04"),
            ("ubuntu-24.04", "Ubuntu 24.04", "ubuntu", "24.04"),
            ("debian-12", "Debian 12", "debian", "12"),
            ("debian-13", "Debian 13", "debian", "13"),
            ("rocky-9", "Rocky Linux 9", "rocky", "9"),
            ("alma-9", "AlmaLinux 9", "alma", "9"),
            ("fedora-42", "Fedora 42", "fedora", "42"),
        ];
        let mut images = Vec::new();
        for (i, (name, description, flavor, version)) in systems.into_iter().enumerate() {
            let i = i as i64;
            for (arch, base) in [("x86", 67_794_000), ("arm", 103_907_000)] {
                images.push(Image {
                    id: base + i,
                    name,
                    description,
                    os_flavor: flavor,
                    os_version: version,
                    architecture: arch,
                    created: image_created(),
                });
            }
        }
        Catalog {
            locations,
            server_types,
            lb_types,
            images,
        }
    }
}

fn by<'a, T>(
    items: &'a [T],
    what: &IdOrName,
    id: impl Fn(&T) -> i64,
    name: impl Fn(&T) -> &str,
) -> Option<&'a T> {
    items.iter().find(|t| match what {
        IdOrName::Id(i) => id(t) == *i,
        IdOrName::Name(n) => name(t) == n,
    })
}

impl Catalog {
    /// Location by ID or name.
    pub fn location(&self, what: &IdOrName) -> Option<&Location> {
        by(&self.locations, what, |l| l.id, |l| l.name)
    }
    /// Location by ID.
    pub fn location_by_id(&self, id: i64) -> Option<&Location> {
        self.locations.iter().find(|l| l.id == id)
    }
    /// Server type by ID or name.
    pub fn server_type(&self, what: &IdOrName) -> Option<&ServerType> {
        by(&self.server_types, what, |t| t.id, |t| t.name)
    }
    /// Server type by ID.
    pub fn server_type_by_id(&self, id: i64) -> Option<&ServerType> {
        self.server_types.iter().find(|t| t.id == id)
    }
    /// Load balancer type by ID or name.
    pub fn lb_type(&self, what: &IdOrName) -> Option<&LbType> {
        by(&self.lb_types, what, |t| t.id, |t| t.name)
    }
    /// Load balancer type by ID.
    pub fn lb_type_by_id(&self, id: i64) -> Option<&LbType> {
        self.lb_types.iter().find(|t| t.id == id)
    }
    /// Image by ID, or by name for the given architecture.
    pub fn image(&self, what: &IdOrName, architecture: &str) -> Option<&Image> {
        self.images.iter().find(|i| match what {
            IdOrName::Id(id) => i.id == *id,
            IdOrName::Name(n) => i.name == n && i.architecture == architecture,
        })
    }
    /// Image by ID.
    pub fn image_by_id(&self, id: i64) -> Option<&Image> {
        self.images.iter().find(|i| i.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_lookups() {
        let c = Catalog::default();
        assert_eq!(c.locations.len(), 6);
        assert_eq!(
            c.location(&IdOrName::Name("hil".into()))
                .unwrap()
                .network_zone,
            "us-west"
        );
        let lb21 = c.lb_type(&IdOrName::Name("lb21".into())).unwrap();
        assert_eq!(
            (
                lb21.max_connections,
                lb21.max_services,
                lb21.max_targets,
                lb21.max_assigned_certificates
            ),
            (20_000, 15, 75, 25)
        );
        let arm = c
            .image(&IdOrName::Name("ubuntu-24.04".into()), "arm")
            .unwrap();
        let x86 = c
            .image(&IdOrName::Name("ubuntu-24.04".into()), "x86")
            .unwrap();
        assert_ne!(arm.id, x86.id);
        assert!(
            c.server_type(&IdOrName::Name("cax11".into()))
                .unwrap()
                .locations
                .contains(&"fsn1")
        );
    }
}
