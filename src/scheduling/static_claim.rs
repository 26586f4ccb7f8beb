//! The NodeClaim a static NodePool (`spec.replicas`) keeps one of per
//! replica, planned from its template alone (Karpenter's
//! `NewNodeClaimTemplate` for a static pool): no pods and no requests, its
//! template's requirements and labels, and every instance type those allow
//! with an available offering as options in launch order — the order the
//! launch would try them in anyway, so the claim's price is known to
//! `simulate` and to disruption.

use super::blocked::BlockedReason;
use super::input::{InstanceTypeOption, NewNodeClaim, NodePoolSpec};
use super::instance_type::{InstanceType, Offering};
use super::labels;
use super::launch_order::launch_order;
use super::resources::Resources;

/// The NodeClaim static pool `pool` opens for a replica, keeping at most
/// `max_types` options (cheapest first, or highest score first when the
/// pool has priority scores). An error when the pool is blocked for a
/// cause other than being static (its class missing, not ready, its
/// extensions failing), or, naming the pool, when no instance type of its
/// class satisfies the template with an available offering.
pub fn static_node_claim(pool: &NodePoolSpec, max_types: usize) -> Result<NewNodeClaim, String> {
    if let Some(why) = pool
        .blocked
        .as_ref()
        .filter(|b| b.reason != BlockedReason::StaticNodePool)
    {
        return Err(why.to_string());
    }
    let requirements = &pool.requirements;
    let mut ranked: Vec<(i32, &InstanceType, &Offering)> = pool
        .instance_types
        .iter()
        .filter(|it| {
            requirements
                .compatible(&it.requirements, labels::is_well_known)
                .is_ok()
        })
        .filter_map(|it| {
            let cheapest = it
                .offerings
                .iter()
                .filter(|o| o.available && o.allowed_by(requirements))
                .min_by(|a, b| a.price.total_cmp(&b.price))?;
            let score = pool
                .priority_scores
                .as_ref()
                .map_or(0, |s| s.get(&it.name).copied().unwrap_or(0));
            Some((score, it, cheapest))
        })
        .collect();
    ranked.sort_by(|a, b| {
        launch_order(
            (i64::from(a.0), a.2.price, &a.1.name),
            (i64::from(b.0), b.2.price, &b.1.name),
        )
    });
    ranked.truncate(max_types.max(1));
    let Some(&(_, chosen, offering)) = ranked.first() else {
        return Err(format!(
            "NodePool {:?}: no instance type of its EC2NodeClass satisfies the template's requirements with an available offering",
            pool.name
        ));
    };
    if let Some(min) = requirements
        .get(labels::INSTANCE_TYPE)
        .and_then(|r| r.min_values)
        .filter(|min| ranked.len() < *min as usize)
    {
        return Err(format!(
            "NodePool {:?}: minValues {min} for {} but only {} instance types are left",
            pool.name,
            labels::INSTANCE_TYPE,
            ranked.len()
        ));
    }
    let mut node_labels = requirements.single_value_labels();
    node_labels.extend(pool.labels.clone());
    node_labels.insert(labels::NODE_POOL.to_string(), pool.name.clone());
    Ok(NewNodeClaim {
        node_pool: pool.name.clone(),
        instance_type_options: ranked
            .iter()
            .map(|(score, it, offering)| InstanceTypeOption {
                name: it.name.clone(),
                price: offering.price,
                score: pool.priority_scores.as_ref().map(|_| *score),
            })
            .collect(),
        instance_type: chosen.name.clone(),
        zone: offering.zone.clone(),
        capacity_type: offering.capacity_type,
        price: offering.price,
        reservation_id: offering.reservation_id.clone(),
        pods: Vec::new(),
        requests: Resources::zero(),
        requirements: requirements.clone(),
        labels: node_labels,
        taints: pool.taints.clone(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::*;
    use crate::scheduling::requirements::{Operator, Requirement, Requirements};
    use crate::scheduling::{CapacityType, Overhead};

    fn offering(zone: &str, capacity_type: CapacityType, price: f64) -> Offering {
        Offering {
            zone: zone.to_string(),
            capacity_type,
            price,
            list_price: price,
            price_is_estimate: false,
            available: true,
            reservation_id: None,
            reservation_capacity: None,
        }
    }

    fn instance_type(name: &str, family: &str, offerings: Vec<Offering>) -> InstanceType {
        let mut requirements = Requirements::new();
        requirements.add(Requirement::single(
            crate::apis::labels::INSTANCE_FAMILY_LABEL_KEY,
            family,
        ));
        InstanceType::new(
            name,
            requirements,
            offerings,
            Resources::parse([("cpu", "2"), ("memory", "8Gi"), ("pods", "29")]).unwrap(),
            Overhead::default(),
        )
    }

    fn pool(requirements: Requirements) -> NodePoolSpec {
        use CapacityType::{OnDemand, Spot};
        NodePoolSpec {
            name: "static".to_string(),
            weight: 0,
            requirements,
            labels: [("team".to_string(), "data".to_string())].into(),
            taints: Vec::new(),
            startup_taints: Vec::new(),
            limits: Default::default(),
            price_limit: None,
            instance_types: Arc::new(vec![
                instance_type(
                    "m5.large",
                    "m5",
                    vec![
                        offering("us-east-1a", OnDemand, 0.096),
                        offering("us-east-1b", Spot, 0.04),
                    ],
                ),
                instance_type(
                    "c5.large",
                    "c5",
                    vec![offering("us-east-1a", OnDemand, 0.085)],
                ),
                instance_type(
                    "r5.large",
                    "r5",
                    vec![offering("us-east-1a", OnDemand, 0.126)],
                ),
            ]),
            priority_scores: None,
            blocked: None,
        }
    }

    fn on_demand_only() -> Requirements {
        let mut r = Requirements::new();
        r.add(Requirement::new(labels::CAPACITY_TYPE, Operator::In, &["on-demand"]).unwrap());
        r.add(Requirement::single(labels::NODE_POOL, "static"));
        r
    }

    #[test]
    fn a_static_claim_offers_every_type_the_template_allows_cheapest_first() {
        let claim = static_node_claim(&pool(on_demand_only()), 60).unwrap();
        let names: Vec<&str> = claim
            .instance_type_options
            .iter()
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(names, ["c5.large", "m5.large", "r5.large"]);
        assert_eq!(claim.instance_type, "c5.large");
        assert_eq!(claim.capacity_type, CapacityType::OnDemand);
        assert!((claim.price - 0.085).abs() < 1e-9);
        assert!(claim.pods.is_empty());
        assert_eq!(claim.requests, Resources::zero());
        assert_eq!(claim.labels.get("team").map(String::as_str), Some("data"));
        assert_eq!(
            claim.labels.get(labels::NODE_POOL).map(String::as_str),
            Some("static")
        );
        // The spot offering is not allowed, so m5.large is priced on demand.
        assert!((claim.instance_type_options[1].price - 0.096).abs() < 1e-9);
    }

    #[test]
    fn the_template_narrows_the_types_and_scores_come_before_price() {
        let mut requirements = on_demand_only();
        requirements.add(
            Requirement::new(
                crate::apis::labels::INSTANCE_FAMILY_LABEL_KEY,
                Operator::NotIn,
                &["c5"],
            )
            .unwrap(),
        );
        let mut spec = pool(requirements);
        spec.priority_scores = Some(Arc::new(HashMap::from([("r5.large".to_string(), 10)])));
        let claim = static_node_claim(&spec, 1).unwrap();
        assert_eq!(claim.instance_type, "r5.large");
        assert_eq!(claim.instance_type_options.len(), 1);
        assert_eq!(claim.instance_type_options[0].score, Some(10));
    }

    #[test]
    fn a_pool_blocked_for_another_cause_opens_nothing_and_says_why() {
        let mut spec = pool(on_demand_only());
        spec.blocked = Some(crate::scheduling::Blocked::new(
            BlockedReason::StaticNodePool,
            "static",
        ));
        assert!(static_node_claim(&spec, 60).is_ok());
        spec.blocked = Some(crate::scheduling::Blocked::new(
            BlockedReason::NodeClassNotFound,
            "EC2NodeClass \"gone\" not found",
        ));
        let error = static_node_claim(&spec, 60).unwrap_err();
        assert!(error.contains("gone"), "{error}");
    }

    #[test]
    fn a_template_no_type_satisfies_is_an_error_naming_the_pool() {
        let mut requirements = on_demand_only();
        requirements.add(Requirement::new(labels::ZONE, Operator::In, &["us-west-2a"]).unwrap());
        let error = static_node_claim(&pool(requirements), 60).unwrap_err();
        assert!(error.contains("NodePool \"static\""), "{error}");
        assert!(error.contains("available offering"), "{error}");
    }
}
