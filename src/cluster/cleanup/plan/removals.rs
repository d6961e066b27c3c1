//! What one cleanup removes ([`CleanupPlan`]) and which kind of cleanup it is ([`Kind`]), as
//! every plan of this folder returns it and `cleanup/apply.rs` carries it out.

use crate::ids::{ClusterKey, TaskArn};

/// Which kind of cleanup a plan is: how its removals are reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Tasks of this profile nothing explains (server-ping, two-phase).
    Orphans,
    /// Tasks of a cluster-profile key that no longer exists, found through GoCD's agents.
    Strays {
        /// The vanished key.
        key: ClusterKey,
    },
    /// Tasks, instances and container instances of ours no live profile owns, found by tag.
    Leftovers,
    /// Task-definition revisions of ours nothing uses.
    TaskDefinitions {
        /// Families of ours kept because they are in use.
        kept: usize,
    },
}

/// One cleanup decided: what to remove. Empty lists ask for nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanupPlan {
    /// Which kind, for the report.
    pub kind: Kind,
    /// Task ARNs to stop, each with the reason ECS shows and the log says.
    pub stop_tasks: Vec<(TaskArn, String)>,
    /// EC2 instance ids to terminate (one call).
    pub terminate_instances: Vec<String>,
    /// Container instance ARNs to deregister.
    pub deregister_container_instances: Vec<String>,
    /// Task-definition revision ARNs to deregister, in order.
    pub deregister_task_definitions: Vec<String>,
}

impl CleanupPlan {
    /// A plan of `kind` that removes nothing (yet).
    pub fn new(kind: Kind) -> Self {
        CleanupPlan {
            kind,
            stop_tasks: Vec::new(),
            terminate_instances: Vec::new(),
            deregister_container_instances: Vec::new(),
            deregister_task_definitions: Vec::new(),
        }
    }

    /// Whether it removes nothing.
    pub fn is_empty(&self) -> bool {
        self.stop_tasks.is_empty()
            && self.terminate_instances.is_empty()
            && self.deregister_container_instances.is_empty()
            && self.deregister_task_definitions.is_empty()
    }
}
