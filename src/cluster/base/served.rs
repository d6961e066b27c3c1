//! The cluster profiles one engine serves: every team's profile that acts in its ECS cluster (one
//! account, region, cluster and role), as GoCD last sent it, by settings fingerprint; which were
//! deleted; and whether the engine retired (no profile of its left, or moved into another key).
//! What retiring does to the agents and instances is `cleanup/retirement.rs`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, PoisonError};

use super::error::Retirement;
use super::locks::{Mutex, MutexGuard};
use crate::ids::SettingsFingerprint;
use crate::settings::ClusterProfile;

/// The profiles an engine serves and its retirement, behind one lock.
#[derive(Debug, Default)]
pub struct Served(Mutex<Teams>);

#[derive(Debug, Default)]
struct Teams {
    retired: Option<Retirement>,
    /// The profiles GoCD sent for this engine since the process started, as last sent, by
    /// settings fingerprint, less the deleted ones and those edited into others.
    served: BTreeMap<SettingsFingerprint, Arc<ClusterProfile>>,
    /// Whether a server-ping has handed the engine every cluster profile GoCD has: only then is
    /// a settings fingerprint (or EC2 pool) no served profile has known to be gone, not just
    /// not heard yet since a restart.
    heard_all: bool,
    /// Settings fingerprints whose profile GoCD deleted: their agents are stopped.
    deleted: BTreeSet<SettingsFingerprint>,
}

impl Served {
    /// The engine retires for `why`; a deletion outranks a move.
    pub fn retire(&self, why: Retirement) {
        let mut teams = self.lock();
        if teams.retired != Some(Retirement::Deleted) {
            teams.retired = Some(why);
        }
    }

    /// GoCD sent `profile`, whose settings fingerprint is `settings`: the engine serves it (and
    /// no longer drains).
    pub fn serve(&self, settings: &SettingsFingerprint, profile: &ClusterProfile) {
        let mut teams = self.lock();
        teams.retired = None;
        teams.deleted.remove(settings);
        teams.served.insert(settings.clone(), Arc::new(profile.clone()));
    }

    /// A server-ping handed the engine every cluster profile GoCD has.
    pub fn heard_all(&self) {
        self.lock().heard_all = true;
    }

    /// The profiles served, in the order of their settings fingerprints, and whether they are
    /// all GoCD has ([`Served::heard_all`]).
    pub fn profiles(&self) -> (Vec<Arc<ClusterProfile>>, bool) {
        let teams = self.lock();
        (teams.served.values().cloned().collect(), teams.heard_all)
    }

    /// The profiles served, by settings fingerprint.
    pub fn by_settings(&self) -> BTreeMap<SettingsFingerprint, Arc<ClusterProfile>> {
        self.lock().served.clone()
    }

    /// The profile of settings fingerprint `settings` as GoCD last sent it, if served.
    pub fn profile_of(&self, settings: &SettingsFingerprint) -> Option<Arc<ClusterProfile>> {
        self.lock().served.get(settings).cloned()
    }

    /// GoCD deleted the profile of fingerprint `settings`: whether another team's profile is
    /// still served.
    pub fn deleted(&self, settings: &SettingsFingerprint) -> bool {
        let mut teams = self.lock();
        teams.served.remove(settings);
        teams.deleted.insert(settings.clone());
        !teams.served.is_empty()
    }

    /// A profile was edited in place from fingerprint `old` to `new` (GoCD sent the edited one,
    /// served under `new`, before).
    pub fn edited(&self, old: &SettingsFingerprint, new: &SettingsFingerprint) {
        if old != new {
            self.lock().served.remove(old);
        }
    }

    /// The settings fingerprints of deleted profiles.
    pub fn deleted_settings(&self) -> BTreeSet<SettingsFingerprint> {
        self.lock().deleted.clone()
    }

    /// Why the engine drains, if it does.
    pub fn retired(&self) -> Option<Retirement> {
        self.lock().retired
    }

    fn lock(&self) -> MutexGuard<'_, Teams> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
