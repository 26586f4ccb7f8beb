//! `nodewright catalog`: which instance types a set of NodePool requirements admits.

use clap::{Args, ValueEnum};

use super::table::Table;
use super::{CliError, emit};
use crate::aws::catalog::{Catalog, PriceSource};
use crate::aws::instance_types::{ResolverSettings, labels, resolve_all};
use crate::scheduling::{CapacityType, InstanceType, Operator, Requirement, Requirements};

/// Arguments of `nodewright catalog`.
#[derive(Debug, Args)]
pub struct CatalogArgs {
    /// AWS region of the embedded catalog.
    #[arg(long, default_value = "us-east-1")]
    region: String,
    /// A NodePool requirement, `KEY=OPERATOR:VALUE[,VALUE…]` (e.g.
    /// `karpenter.k8s.aws/instance-family=In:c7i-flex`) or `KEY=Exists` /
    /// `KEY=DoesNotExist`. Repeat to combine.
    #[arg(long = "requirement", short = 'r', value_name = "KEY=OP:VALUES")]
    requirements: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Table)]
    output: Output,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
}

/// Why a `--requirement` argument was rejected.
#[derive(Debug, thiserror::Error)]
pub enum RequirementArgError {
    /// No `=` between key and operator.
    #[error("--requirement {0:?}: expected KEY=OPERATOR:VALUES, e.g. kubernetes.io/arch=In:arm64")]
    Shape(String),
    /// `In`/`NotIn` without values.
    #[error("--requirement {0:?}: In and NotIn need at least one value, e.g. KEY=In:a,b")]
    NoValues(String),
    /// The key, operator or values are not a valid requirement.
    #[error("--requirement {arg:?}: {source}")]
    Invalid {
        /// The argument as given.
        arg: String,
        /// What is wrong with it.
        #[source]
        source: crate::scheduling::RequirementError,
    },
}

/// Parses `KEY=OP:V1,V2`, `KEY=Exists` or `KEY=DoesNotExist`.
pub fn parse_requirement(arg: &str) -> Result<Requirement, RequirementArgError> {
    let (key, rest) = arg
        .split_once('=')
        .filter(|(key, _)| !key.trim().is_empty())
        .ok_or_else(|| RequirementArgError::Shape(arg.to_string()))?;
    let (operator, values) = rest.split_once(':').unwrap_or((rest, ""));
    let values: Vec<&str> = values
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    let invalid = |source| RequirementArgError::Invalid {
        arg: arg.to_string(),
        source,
    };
    let operator = Operator::parse(operator.trim()).map_err(invalid)?;
    if values.is_empty() && matches!(operator, Operator::In | Operator::NotIn) {
        return Err(RequirementArgError::NoValues(arg.to_string()));
    }
    Requirement::new(key.trim(), operator, &values).map_err(invalid)
}

/// Prints the instance types that satisfy every requirement.
pub fn run(args: &CatalogArgs) -> Result<(), CliError> {
    let requirements: Requirements = args
        .requirements
        .iter()
        .map(|arg| parse_requirement(arg))
        .collect::<Result<_, _>>()?;
    let catalog = Catalog::embedded(&args.region)?;
    let all = resolve_all(&catalog, &ResolverSettings::default())?;
    let mut matching: Vec<&InstanceType> = all
        .iter()
        .filter(|it| it.requirements.intersects(&requirements).is_ok())
        .collect();
    // Cheapest first, as a NodeClaim's options are ordered; unpriced types last.
    matching.sort_by(|a, b| {
        let price = |it: &InstanceType| cheapest_on_demand(it).map_or(f64::INFINITY, |p| p.0);
        price(a)
            .total_cmp(&price(b))
            .then_with(|| a.name.cmp(&b.name))
    });
    let out = match args.output {
        Output::Table => table(&catalog, &matching),
        Output::Json => json(&catalog, &matching)?,
    };
    emit(&out)
}

fn cheapest_on_demand(it: &InstanceType) -> Option<(f64, bool)> {
    it.offerings
        .iter()
        .filter(|o| o.available && o.capacity_type == CapacityType::OnDemand)
        .map(|o| (o.price, o.price_is_estimate))
        .min_by(|a, b| a.0.total_cmp(&b.0))
}

fn label(it: &InstanceType, key: &str) -> String {
    it.requirements
        .single_value_labels()
        .get(key)
        .cloned()
        .unwrap_or_else(|| "-".to_string())
}

fn table(catalog: &Catalog, types: &[&InstanceType]) -> String {
    let mut table = Table::new(&[
        "NAME",
        "ARCH",
        "#VCPU",
        "#MEMORY",
        "#PODS",
        "#ON-DEMAND $/H",
    ]);
    for it in types {
        let price = match cheapest_on_demand(it) {
            Some((price, estimate)) => format!("{}{price:.4}", if estimate { "~" } else { "" }),
            None => "unavailable".to_string(),
        };
        table.row(vec![
            it.name.clone(),
            label(it, labels::ARCH),
            label(it, labels::INSTANCE_CPU),
            format!("{}Mi", label(it, labels::INSTANCE_MEMORY)),
            it.capacity.pods.to_string(),
            price,
        ]);
    }
    let mut out = table.render();
    out.push_str(&format!(
        "{} instance types in {}\n",
        types.len(),
        catalog.region()
    ));
    match catalog.prices().source() {
        PriceSource::Snapshot { generated_at } => {
            out.push_str(&format!("prices: on-demand snapshot of {generated_at}\n"));
        }
        PriceSource::Borrowed {
            from_region,
            generated_at,
        } => {
            out.push_str(&format!(
                "prices: ~ marks estimates: {} has no price data, the {from_region} snapshot of {generated_at} is shown\n",
                catalog.region()
            ));
        }
    }
    out
}

fn json(catalog: &Catalog, types: &[&InstanceType]) -> Result<String, CliError> {
    let items: Vec<serde_json::Value> = types
        .iter()
        .map(|it| {
            let price = cheapest_on_demand(it);
            serde_json::json!({
                "name": it.name,
                "labels": it.requirements.single_value_labels(),
                "capacity": {
                    "cpu": format!("{}m", it.capacity.cpu_millis),
                    "memory": it.capacity.memory,
                    "pods": it.capacity.pods,
                    "ephemeralStorage": it.capacity.ephemeral_storage,
                    "extended": it.capacity.extended,
                },
                "allocatable": {
                    "cpu": format!("{}m", it.allocatable().cpu_millis),
                    "memory": it.allocatable().memory,
                    "pods": it.allocatable().pods,
                },
                "zones": it.offerings.iter().map(|o| o.zone.as_str()).collect::<std::collections::BTreeSet<_>>(),
                "onDemandPricePerHour": price.map(|p| p.0),
                "priceIsEstimate": price.is_some_and(|p| p.1),
            })
        })
        .collect();
    let doc = serde_json::json!({"region": catalog.region(), "instanceTypes": items});
    Ok(format!("{}\n", serde_json::to_string_pretty(&doc)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_in_exists_and_numeric_requirements() {
        let r =
            parse_requirement("karpenter.k8s.aws/instance-family=In:c7i-flex,m7i-flex").unwrap();
        assert!(r.has("c7i-flex") && r.has("m7i-flex") && !r.has("m5"));
        let r = parse_requirement("karpenter.k8s.aws/instance-gpu-count=Exists").unwrap();
        assert_eq!(r.operator(), Operator::Exists);
        let r = parse_requirement("karpenter.k8s.aws/instance-cpu=Gt:4").unwrap();
        assert!(r.has("8") && !r.has("4"));
    }

    #[test]
    fn malformed_requirements_are_clear_errors() {
        for bad in ["no-equals", "=In:x", "k=Near:x", "k=In:", "k=Gt:abc"] {
            let err = parse_requirement(bad).unwrap_err().to_string();
            assert!(err.contains("--requirement"), "{bad}: {err}");
        }
    }
}
