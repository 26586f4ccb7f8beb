//! Loads the real EC2 catalog nodewright embeds (`src/aws/catalog/data/`)
//! into SDK instance types:
//! the types offered in us-east-1 that have an on-demand price, with one
//! on-demand and one spot offering per zone (spot at 40% of on-demand, an
//! assumption for tests).

use std::{
    collections::{BTreeMap, HashMap},
    io::Read,
    path::PathBuf,
};

use nodewright_filter::{Accelerator, Architecture, CapacityType, InstanceTypeInfo, Offering};
use serde_json::Value;

fn read_gz(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../src/aws/catalog/data")
        .join(name);
    let file = std::fs::File::open(&path).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn accelerators(list: Option<&Vec<Value>>) -> Vec<Accelerator> {
    list.map(|l| {
        l.iter()
            .map(|g| Accelerator {
                name: g["Name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_ascii_lowercase()
                    .replace(' ', "-"),
                manufacturer: g["Manufacturer"]
                    .as_str()
                    .unwrap_or("aws")
                    .to_ascii_lowercase(),
                count: g["Count"].as_u64().unwrap_or(0) as u32,
                memory_mib: g["MemoryInfo"]["SizeInMiB"].as_u64().unwrap_or(0),
            })
            .collect()
    })
    .unwrap_or_default()
}

/// The catalog, sorted by name.
pub fn us_east_1() -> Vec<InstanceTypeInfo> {
    let types = read_gz("instance-types.json.gz");
    let offerings = read_gz("offerings-us-east-1.json.gz");
    let prices = read_gz("on-demand-prices-us-east-1.json.gz");
    let prices = &prices["regions"]["us-east-1"];
    let mut zones: HashMap<&str, Vec<&str>> = HashMap::new();
    for o in offerings.as_array().unwrap() {
        zones
            .entry(o["InstanceType"].as_str().unwrap())
            .or_default()
            .push(o["Location"].as_str().unwrap());
    }
    let mut out = Vec::new();
    for (name, t) in types.as_object().unwrap() {
        let (Some(zs), Some(price)) = (zones.get(name.as_str()), prices[name].as_f64()) else {
            continue;
        };
        let (family, size) = name.split_once('.').unwrap();
        let category: String = family
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        let generation = family[category.len()..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect::<String>();
        let arch = t["ProcessorInfo"]["SupportedArchitectures"]
            .as_array()
            .unwrap();
        let architecture = if arch.iter().any(|a| a == "arm64") {
            Architecture::Arm64
        } else {
            Architecture::Amd64
        };
        let classes = t["SupportedUsageClasses"].as_array().unwrap();
        let mut offerings = Vec::new();
        for z in zs {
            offerings.push(Offering {
                zone: z.to_string(),
                capacity_type: CapacityType::OnDemand,
                price,
                available: true,
                reservation_id: None,
            });
            if classes.iter().any(|c| c == "spot") {
                offerings.push(Offering {
                    zone: z.to_string(),
                    capacity_type: CapacityType::Spot,
                    price: price * 0.4,
                    available: true,
                    reservation_id: None,
                });
            }
        }
        let nvme = t["InstanceStorageInfo"]["NvmeSupport"]
            .as_str()
            .is_some_and(|s| s != "unsupported");
        let mut labels = BTreeMap::new();
        if let Some(mhz) = t["ProcessorInfo"]["SustainedClockSpeedInGhz"].as_f64() {
            labels.insert(
                "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz".to_string(),
                ((mhz * 1000.0).round() as u64).to_string(),
            );
        }
        out.push(InstanceTypeInfo {
            name: name.clone(),
            family: family.to_string(),
            category,
            generation: generation.parse().unwrap_or(0),
            size: size.to_string(),
            architecture,
            cpu_manufacturer: t["ProcessorInfo"]["Manufacturer"]
                .as_str()
                .unwrap_or_default()
                .to_ascii_lowercase(),
            vcpu: t["VCpuInfo"]["DefaultVCpus"].as_u64().unwrap() as u32,
            memory_mib: t["MemoryInfo"]["SizeInMiB"].as_u64().unwrap(),
            gpus: accelerators(t["GpuInfo"]["Gpus"].as_array()),
            accelerators: accelerators(t["NeuronInfo"]["NeuronDevices"].as_array()),
            local_nvme_gib: if nvme {
                t["InstanceStorageInfo"]["TotalSizeInGB"]
                    .as_u64()
                    .unwrap_or(0)
            } else {
                0
            },
            network_bandwidth_mbps: (t["NetworkInfo"]["NetworkCards"][0]["BaselineBandwidthInGbps"]
                .as_f64()
                .unwrap_or(0.0)
                * 1000.0) as u32,
            ebs_bandwidth_mbps: t["EbsInfo"]["EbsOptimizedInfo"]["BaselineBandwidthInMbps"]
                .as_u64()
                .unwrap_or(0) as u32,
            hypervisor: t["Hypervisor"].as_str().unwrap_or_default().to_string(),
            bare_metal: t["BareMetal"].as_bool().unwrap_or(false),
            burstable: t["BurstablePerformanceSupported"]
                .as_bool()
                .unwrap_or(false),
            current_generation: t["CurrentGeneration"].as_bool().unwrap_or(false),
            encryption_in_transit: t["NetworkInfo"]["EncryptionInTransitSupported"]
                .as_bool()
                .unwrap_or(false),
            labels,
            offerings,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}
