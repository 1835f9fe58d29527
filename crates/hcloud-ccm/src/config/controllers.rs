//! The `--controllers` flag: which cloud controllers run.
//!
//! Same rules as `k8s.io/cloud-provider`: the list defaults to `*` (every controller), an entry
//! `name` enables and `-name` disables a controller, the first entry naming a controller wins,
//! and `*` only decides for controllers no entry names. Each controller is known by its current
//! name and by its old (pre-1.28) name; unknown names are an error.

use std::fmt;

/// One controller of the cloud-controller-manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Controller {
    /// Initialises Nodes and keeps their addresses and labels in sync with the cloud.
    CloudNode,
    /// Marks shut-down Nodes and deletes Nodes whose server is gone.
    CloudNodeLifecycle,
    /// Reconciles Services of type LoadBalancer.
    ServiceLb,
    /// Programs pod-network routes for Nodes.
    NodeRoute,
}

impl Controller {
    /// Every controller, in start order.
    pub const ALL: [Controller; 4] = [
        Controller::CloudNode,
        Controller::CloudNodeLifecycle,
        Controller::ServiceLb,
        Controller::NodeRoute,
    ];

    /// The current name (`cloud-node-controller`, …).
    pub fn name(self) -> &'static str {
        match self {
            Controller::CloudNode => "cloud-node-controller",
            Controller::CloudNodeLifecycle => "cloud-node-lifecycle-controller",
            Controller::ServiceLb => "service-lb-controller",
            Controller::NodeRoute => "node-route-controller",
        }
    }

    /// The old name, still accepted in `--controllers`, and the `name` label of the
    /// `running_managed_controllers` metric.
    pub fn alias(self) -> &'static str {
        match self {
            Controller::CloudNode => "cloud-node",
            Controller::CloudNodeLifecycle => "cloud-node-lifecycle",
            Controller::ServiceLb => "service",
            Controller::NodeRoute => "route",
        }
    }

    /// The label used in `running_managed_controllers{name=…}` (the old name).
    pub fn metric_name(self) -> &'static str {
        self.alias()
    }

    /// The client name: the user-agent suffix of the controller's API client.
    pub fn client_name(self) -> &'static str {
        match self {
            Controller::CloudNode | Controller::CloudNodeLifecycle => "node-controller",
            Controller::ServiceLb => "service-controller",
            Controller::NodeRoute => "route-controller",
        }
    }

    /// Looks a controller up by its current or old name.
    pub fn from_name(name: &str) -> Option<Controller> {
        Controller::ALL
            .into_iter()
            .find(|c| c.name() == name || c.alias() == name)
    }
}

impl fmt::Display for Controller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The set of controllers selected by `--controllers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EnabledControllers {
    enabled: [bool; 4],
}

impl EnabledControllers {
    /// Every controller enabled (the default `*`).
    pub fn all() -> Self {
        EnabledControllers { enabled: [true; 4] }
    }

    /// Whether `controller` should run.
    pub fn is_enabled(&self, controller: Controller) -> bool {
        self.enabled[Self::index(controller)]
    }

    /// The enabled controllers in start order.
    pub fn iter(&self) -> impl Iterator<Item = Controller> + '_ {
        Controller::ALL.into_iter().filter(|c| self.is_enabled(*c))
    }

    fn index(controller: Controller) -> usize {
        match controller {
            Controller::CloudNode => 0,
            Controller::CloudNodeLifecycle => 1,
            Controller::ServiceLb => 2,
            Controller::NodeRoute => 3,
        }
    }

    /// Evaluates a `--controllers` list. Entries are trimmed; empty entries are ignored (so an
    /// empty flag value enables nothing). Returns every unknown entry as an error message.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, Vec<String>> {
        let entries: Vec<&str> = entries
            .iter()
            .map(|e| e.as_ref().trim())
            .filter(|e| !e.is_empty())
            .collect();
        let mut unknown = Vec::new();
        for entry in &entries {
            let name = entry.strip_prefix('-').unwrap_or(entry);
            if *entry != "*" && Controller::from_name(name).is_none() {
                unknown.push(format!(
                    "{entry:?} is not a known controller (known: {})",
                    Controller::ALL
                        .iter()
                        .map(|c| format!("{} (alias {})", c.name(), c.alias()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        if !unknown.is_empty() {
            return Err(unknown);
        }
        let star = entries.contains(&"*");
        let mut result = EnabledControllers::default();
        for controller in Controller::ALL {
            let mut decision = None;
            for entry in &entries {
                let (enable, name) = match entry.strip_prefix('-') {
                    Some(name) => (false, name),
                    None => (true, *entry),
                };
                if Controller::from_name(name) == Some(controller) {
                    decision = Some(enable);
                    break;
                }
            }
            // No controller of the cloud-controller-manager is disabled by default.
            result.enabled[Self::index(controller)] = decision.unwrap_or(star);
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled(list: &[&str]) -> Vec<Controller> {
        EnabledControllers::parse(list).unwrap().iter().collect()
    }

    #[test]
    fn star_enables_everything() {
        assert_eq!(enabled(&["*"]), Controller::ALL.to_vec());
    }

    #[test]
    fn minus_disables_by_old_or_new_name() {
        assert_eq!(
            enabled(&["*", "-route"]),
            vec![
                Controller::CloudNode,
                Controller::CloudNodeLifecycle,
                Controller::ServiceLb
            ]
        );
        assert_eq!(
            enabled(&["*", "-service-lb-controller", "-node-route-controller"]),
            vec![Controller::CloudNode, Controller::CloudNodeLifecycle]
        );
    }

    #[test]
    fn explicit_names_without_star() {
        assert_eq!(
            enabled(&["cloud-node", "cloud-node-lifecycle-controller"]),
            vec![Controller::CloudNode, Controller::CloudNodeLifecycle]
        );
        assert_eq!(enabled(&[]), Vec::<Controller>::new());
        assert_eq!(enabled(&[""]), Vec::<Controller>::new());
    }

    #[test]
    fn first_entry_naming_a_controller_wins() {
        assert!(!enabled(&["-service", "service", "*"]).contains(&Controller::ServiceLb));
        assert!(enabled(&["service-lb-controller", "-service"]).contains(&Controller::ServiceLb));
    }

    #[test]
    fn unknown_names_are_all_reported() {
        let errors =
            EnabledControllers::parse(&["*", "-nodeipam", "bogus", "service"]).unwrap_err();
        assert_eq!(errors.len(), 2);
        assert!(errors[0].contains("\"-nodeipam\""));
        assert!(errors[1].contains("\"bogus\""));
    }

    #[test]
    fn names_and_labels() {
        assert_eq!(Controller::from_name("route"), Some(Controller::NodeRoute));
        assert_eq!(Controller::ServiceLb.metric_name(), "service");
        assert_eq!(
            Controller::CloudNodeLifecycle.client_name(),
            "node-controller"
        );
    }
}
