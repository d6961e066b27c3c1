//! Retirement: a cluster profile GoCD deleted or no longer sends. Its engine takes no new work
//! and drains: at once when deleted (tasks stopped, instances retired), as jobs complete when it
//! moved (an edit into another key) or vanished unheard.
//!
//! Two teams' cluster profiles on one cluster, account and role share one engine (`docs/design.md`,
//! "Where the truth lives"; docs/operators.md "Several teams"). Each team's tasks carry its
//! settings fingerprint (`gocd:cluster-settings`), so deleting one team's profile stops that team's
//! agents only; the engine itself retires once no team's profile is left in it. Each team's
//! profile is kept as GoCD last sent it: the EC2 loop plans each one's instances with its own
//! settings (`ec2/pools.rs`), and each agent's per-profile settings (its register timeout, its
//! job's price table) are its own profile's ([`Cluster::profile_of`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::cluster::Cluster;
use crate::ids::SettingsFingerprint;
use crate::protocol::host_calls::HealthKind;
use crate::settings::ClusterProfile;

pub use crate::cluster::base::error::Retirement;

impl Cluster {
    /// The profile was deleted or moved: drain (see [`Retirement`]).
    pub fn retire(&self, why: Retirement) {
        self.state.served.retire(why);
        let what = match why {
            Retirement::Deleted => "its cluster profile was deleted: its agents are stopped and its instances retired",
            Retirement::Replaced => "its cluster profile moved or is gone: its agents stop as their jobs complete",
        };
        self.event(HealthKind::Warning, what);
        self.ec2().wake();
    }

    /// GoCD sent `profile`, whose settings fingerprint is `settings`: the engine serves it.
    pub fn serve_again(&self, settings: &SettingsFingerprint, profile: &ClusterProfile) {
        self.state.served.serve(settings, profile);
    }

    /// A server-ping handed the engine every cluster profile GoCD has (it resolves them all
    /// before it reconciles any engine).
    pub fn heard_every_profile(&self) {
        self.state.served.heard_all();
    }

    /// The profiles the engine serves, in the order of their settings fingerprints, and whether
    /// they are all GoCD has ([`Cluster::heard_every_profile`]).
    pub fn served_profiles(&self) -> (Vec<Arc<ClusterProfile>>, bool) {
        self.state.served.profiles()
    }

    /// The profiles the engine serves, by settings fingerprint: each agent's settings come from
    /// the one of its own fingerprint.
    pub fn served_by_settings(&self) -> BTreeMap<SettingsFingerprint, Arc<ClusterProfile>> {
        self.state.served.by_settings()
    }

    /// The profile of settings fingerprint `settings` as GoCD last sent it, or the profile GoCD
    /// sent last when the engine does not serve that one (not heard since the process started,
    /// or deleted): what decides a per-profile setting for an agent of that fingerprint.
    pub fn profile_of(&self, settings: &SettingsFingerprint) -> Arc<ClusterProfile> {
        self.state.served.profile_of(settings).unwrap_or_else(|| self.profile())
    }

    /// GoCD deleted the cluster profile whose settings fingerprint is `settings`. When no other
    /// team's profile is served by this engine, the engine retires ([`Retirement::Deleted`]);
    /// otherwise only that team's agents are stopped, at the next server-ping.
    pub fn profile_deleted(&self, settings: &SettingsFingerprint) {
        let others_left = self.state.served.deleted(settings);
        if others_left {
            let what =
                "one team's cluster profile on this cluster was deleted: its agents are stopped, the others' run on";
            self.event(HealthKind::Warning, what);
        } else {
            self.retire(Retirement::Deleted);
        }
    }

    /// A team's profile was edited in place: its agents count under the new settings (GoCD sent
    /// the edited profile, and the engine serves it, before this).
    pub fn settings_edited(&self, old: &SettingsFingerprint, new: &SettingsFingerprint) {
        self.state.served.edited(old, new);
        self.registry().settings_changed(old, new);
    }

    /// The settings fingerprints of deleted profiles: agents started under them are stopped.
    pub fn deleted_settings(&self) -> BTreeSet<SettingsFingerprint> {
        self.state.served.deleted_settings()
    }

    /// Why the engine drains, if it does.
    pub fn retired(&self) -> Option<Retirement> {
        self.state.served.retired()
    }

    /// A retired engine with no agent that may still run and no instance left.
    pub fn is_drained(&self) -> bool {
        self.retired().is_some()
            && !self.registry().all().any(|a| a.phase.occupies_capacity())
            && self.ec2().state().has_no_instance()
    }
}
