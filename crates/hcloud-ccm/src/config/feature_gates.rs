//! `--feature-gates`.

use super::parse_go_bool;

/// Feature gates (`--feature-gates`) this CCM implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeatureGates {
    /// `CloudControllerManagerWatchBasedRoutesReconciliation`: the route controller also
    /// reconciles when Nodes are added or deleted or change pod CIDRs or addresses.
    pub watch_based_routes: bool,
}

/// Name of the watch-based route reconciliation gate.
pub const WATCH_BASED_ROUTES_GATE: &str = "CloudControllerManagerWatchBasedRoutesReconciliation";

/// Parses `Name=BOOL,Name=BOOL` (spaces around entries allowed). Returns the gates and the names
/// this CCM does not know (upstream refuses unknown names; this CCM implements a subset of
/// upstream's gates, so it only warns), or the first syntax error.
pub fn parse_feature_gates(value: &str) -> Result<(FeatureGates, Vec<String>), String> {
    let mut gates = FeatureGates::default();
    let mut unknown = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, raw)) = entry.split_once('=') else {
            return Err(format!("{entry:?} is not Name=true or Name=false"));
        };
        let name = name.trim();
        let Some(enabled) = parse_go_bool(raw.trim()) else {
            return Err(format!("invalid boolean {:?} for {name}", raw.trim()));
        };
        if name == WATCH_BASED_ROUTES_GATE {
            gates.watch_based_routes = enabled;
        } else {
            unknown.push(name.to_owned());
        }
    }
    Ok((gates, unknown))
}
