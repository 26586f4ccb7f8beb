//! The one order in which instance types are tried for a launch: the
//! scheduler's options, the cloud provider's fleet priorities and the
//! extensions' reports of what a scorer changed all follow it, so what a
//! user reads is what is launched.

use std::cmp::Ordering;

/// Where an instance type stands for a launch: its priority score (0
/// without scorers), the price of its cheapest usable offering and its name.
pub type LaunchRank<'a> = (i64, f64, &'a str);

/// Compares two instance types for a launch: higher score first, then the
/// cheaper, then by name, so equal candidates keep one order whatever list
/// they came from.
pub fn launch_order(a: LaunchRank<'_>, b: LaunchRank<'_>) -> Ordering {
    b.0.cmp(&a.0)
        .then_with(|| a.1.total_cmp(&b.1))
        .then_with(|| a.2.cmp(b.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_then_price_then_name() {
        let mut ranks: Vec<LaunchRank> = vec![
            (0, 0.2, "c5.large"),
            (0, 0.1, "m5.large"),
            (5, 0.9, "r5.large"),
            (0, 0.1, "a1.large"),
            (0, f64::INFINITY, "t3.large"),
            (-1, 0.01, "t4g.nano"),
        ];
        ranks.sort_by(|a, b| launch_order(*a, *b));
        let names: Vec<&str> = ranks.iter().map(|r| r.2).collect();
        assert_eq!(
            names,
            [
                "r5.large", "a1.large", "m5.large", "c5.large", "t3.large", "t4g.nano"
            ]
        );
        assert_eq!(launch_order((1, 0.5, "x"), (1, 0.5, "x")), Ordering::Equal);
    }
}
