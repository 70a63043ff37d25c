//! The Lease lock's rules, as client-go's `leaderelection` has them, with no I/O and no clock
//! of its own (so they are tested on a fake clock):
//!
//! - Another holder's Lease is expired only when its record has not changed for its full
//!   `leaseDurationSeconds` *as observed by this replica*: from the instant this replica last
//!   saw the record change (its own monotonic clock), never from the `renewTime` written by
//!   another replica's clock. Only the clock *rate* matters, not the offset between clocks.
//! - A Lease is taken or renewed only by an update carrying the resourceVersion that was read,
//!   so of two replicas moving at once one gets a conflict and backs off.
//! - A released Lease (no holder) may be taken at once; a Lease is released only by its holder.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::ObjectMeta;

/// The three durations of client-go's leader election.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Durations {
    /// How long a Lease lasts without renewal: how long a dead holder blocks the others.
    pub lease: Duration,
    /// A holder that has not renewed for this long stops acting; shorter than `lease`, so it
    /// stops before anyone else may take over. The gap is the tolerated clock-rate difference.
    pub renew_deadline: Duration,
    /// Pause between two tries to acquire or renew.
    pub retry: Duration,
}

impl Default for Durations {
    /// controller-runtime's defaults.
    fn default() -> Self {
        Durations { lease: Duration::from_secs(15), renew_deadline: Duration::from_secs(10), retry: Duration::from_secs(2) }
    }
}

impl Durations {
    /// The rules a user's choice must follow, each named.
    pub fn validate(&self) -> Result<(), String> {
        if self.retry.is_zero() {
            return Err("the retry period must be longer than zero".into());
        }
        if self.renew_deadline <= self.retry {
            return Err(format!("the renew deadline ({:?}) must be longer than the retry period ({:?})", self.renew_deadline, self.retry));
        }
        if self.lease <= self.renew_deadline {
            return Err(format!("the renew deadline ({:?}) must be shorter than the lease duration ({:?})", self.renew_deadline, self.lease));
        }
        Ok(())
    }

    /// `leaseDurationSeconds` as written (whole seconds, rounded up).
    pub fn lease_seconds(&self) -> i32 {
        self.lease.as_secs_f64().ceil().clamp(1.0, i32::MAX as f64) as i32
    }
}

/// What to do with the Lease as read.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// There is none: create it, held by this replica.
    Create(Lease),
    /// Take or renew it: replace it with this (it carries the resourceVersion read).
    Update(Lease),
    /// Another replica holds it and it has not expired as this replica observes it.
    HeldByAnother { holder: String, expires_in: Duration },
}

/// The record as this replica last saw it change.
#[derive(Debug, Clone)]
struct Observed {
    resource_version: String,
    duration: Duration,
    at: Instant,
}

/// One replica's view of one Lease.
#[derive(Debug, Clone)]
pub struct LeaseLock {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    lease_seconds: i32,
    observed: Option<Observed>,
}

impl LeaseLock {
    pub fn new(namespace: &str, name: &str, identity: &str, durations: &Durations) -> Self {
        LeaseLock {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_seconds: durations.lease_seconds(),
            observed: None,
        }
    }

    /// Decide from the Lease read at `now` (`wall` is what this replica writes as times).
    pub fn plan(&mut self, read: Option<&Lease>, now: Instant, wall: jiff::Timestamp) -> Plan {
        let Some(lease) = read else {
            let spec = self.spec(None, wall);
            return Plan::Create(Lease {
                metadata: ObjectMeta { name: Some(self.name.clone()), namespace: Some(self.namespace.clone()), ..ObjectMeta::default() },
                spec: Some(spec),
            });
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let resource_version = lease.metadata.resource_version.clone().unwrap_or_default();
        if self.observed.as_ref().is_none_or(|o| o.resource_version != resource_version) {
            let seconds = spec.lease_duration_seconds.unwrap_or(self.lease_seconds).max(0);
            self.observed = Some(Observed { resource_version, duration: Duration::from_secs(seconds as u64), at: now });
        }
        let observed = self.observed.as_ref().expect("observed above");
        if let Some(holder) = &holder
            && holder != &self.identity
        {
            let expires = observed.at + observed.duration;
            if expires > now {
                return Plan::HeldByAnother { holder: holder.clone(), expires_in: expires - now };
            }
        }
        let mut taken = lease.clone();
        taken.spec = Some(self.spec(Some(&spec), wall));
        Plan::Update(taken)
    }

    /// This replica's write of the Lease succeeded; `now` is when its answer came.
    pub fn wrote(&mut self, written: &Lease, now: Instant) {
        let spec = written.spec.clone().unwrap_or_default();
        self.observed = Some(Observed {
            resource_version: written.metadata.resource_version.clone().unwrap_or_default(),
            duration: Duration::from_secs(spec.lease_duration_seconds.unwrap_or(self.lease_seconds).max(0) as u64),
            at: now,
        });
    }

    /// The release of a Lease this replica holds, as its last write left it (the update
    /// carries that resourceVersion: if anyone wrote since, the release is refused). None if
    /// this replica does not hold it as far as it knows.
    pub fn release(&self, last_written: &Lease, wall: jiff::Timestamp) -> Option<Lease> {
        let spec = last_written.spec.clone()?;
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return None;
        }
        let mut released = last_written.clone();
        released.spec = Some(LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(1),
            renew_time: Some(MicroTime(wall)),
            acquire_time: Some(MicroTime(wall)),
            ..spec
        });
        Some(released)
    }

    /// The spec this replica writes over `old` (kept: acquire time and transitions while it
    /// already held it).
    fn spec(&self, old: Option<&LeaseSpec>, wall: jiff::Timestamp) -> LeaseSpec {
        let held = old.is_some_and(|o| o.holder_identity.as_deref() == Some(self.identity.as_str()));
        let transitions = old.and_then(|o| o.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.lease_seconds),
            acquire_time: if held { old.and_then(|o| o.acquire_time.clone()) } else { Some(MicroTime(wall)) },
            renew_time: Some(MicroTime(wall)),
            lease_transitions: Some(if held || old.is_none() { transitions } else { transitions.saturating_add(1) }),
            ..old.cloned().unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn durations() -> Durations {
        Durations { lease: Duration::from_secs(15), renew_deadline: Duration::from_secs(10), retry: Duration::from_secs(2) }
    }

    fn lease(holder: &str, rv: u64, duration: i32, renewed: jiff::Timestamp) -> Lease {
        Lease {
            metadata: ObjectMeta { name: Some("l".into()), namespace: Some("ns".into()), resource_version: Some(rv.to_string()), ..ObjectMeta::default() },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(duration),
                renew_time: Some(MicroTime(renewed)),
                acquire_time: Some(MicroTime(renewed)),
                lease_transitions: Some(3),
                ..LeaseSpec::default()
            }),
        }
    }

    fn holder(plan: &Plan) -> Option<String> {
        match plan {
            Plan::Create(l) | Plan::Update(l) => l.spec.as_ref()?.holder_identity.clone(),
            Plan::HeldByAnother { .. } => None,
        }
    }

    #[test]
    fn durations_are_validated_as_client_go_requires() {
        assert!(durations().validate().is_ok());
        let equal = Durations { renew_deadline: Duration::from_secs(15), ..durations() };
        assert!(equal.validate().unwrap_err().contains("shorter than the lease duration"));
        let slow_retry = Durations { retry: Duration::from_secs(10), ..durations() };
        assert!(slow_retry.validate().unwrap_err().contains("longer than the retry period"));
        assert_eq!(Durations { lease: Duration::from_millis(2500), ..durations() }.lease_seconds(), 3);
    }

    #[test]
    fn an_absent_lease_is_created_held_by_this_replica() {
        let mut lock = LeaseLock::new("ns", "l", "me", &durations());
        let plan = lock.plan(None, Instant::now(), jiff::Timestamp::now());
        let Plan::Create(created) = &plan else { panic!("{plan:?}") };
        let spec = created.spec.as_ref().unwrap();
        assert_eq!((spec.holder_identity.as_deref(), spec.lease_duration_seconds, spec.lease_transitions), (Some("me"), Some(15), Some(0)));
        assert_eq!(created.metadata.resource_version, None);
    }

    #[test]
    fn another_holder_is_waited_for_a_full_lease_from_when_its_record_was_last_seen_changing() {
        let t0 = Instant::now();
        // Its renewTime says it renewed an hour ago (another clock): that does not count.
        let old = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1);
        let mut lock = LeaseLock::new("ns", "l", "me", &durations());
        let first = lease("other", 10, 15, old);
        assert_eq!(lock.plan(Some(&first), t0, jiff::Timestamp::now()), Plan::HeldByAnother { holder: "other".into(), expires_in: Duration::from_secs(15) });
        // 14 s later, unchanged: still held.
        let at14 = t0 + Duration::from_secs(14);
        assert!(matches!(lock.plan(Some(&first), at14, jiff::Timestamp::now()), Plan::HeldByAnother { expires_in, .. } if expires_in == Duration::from_secs(1)));
        // It renewed (a new resourceVersion) at 14 s: the 15 s start again from there.
        let renewed = lease("other", 11, 15, old);
        assert!(matches!(lock.plan(Some(&renewed), at14, jiff::Timestamp::now()), Plan::HeldByAnother { .. }));
        assert!(matches!(lock.plan(Some(&renewed), t0 + Duration::from_secs(28), jiff::Timestamp::now()), Plan::HeldByAnother { .. }));
        // Unchanged for 15 s as observed here: taken, by an update carrying the version read.
        let plan = lock.plan(Some(&renewed), t0 + Duration::from_secs(29), jiff::Timestamp::now());
        let Plan::Update(taken) = &plan else { panic!("{plan:?}") };
        assert_eq!(taken.metadata.resource_version.as_deref(), Some("11"));
        let spec = taken.spec.as_ref().unwrap();
        assert_eq!((spec.holder_identity.as_deref(), spec.lease_transitions), (Some("me"), Some(4)));
        assert_ne!(spec.acquire_time.as_ref().unwrap().0, old, "a new holder's acquire time");
    }

    #[test]
    fn the_records_own_duration_decides_its_expiry() {
        let t0 = Instant::now();
        let mut lock = LeaseLock::new("ns", "l", "me", &durations());
        let long = lease("other", 5, 3600, jiff::Timestamp::now());
        lock.plan(Some(&long), t0, jiff::Timestamp::now());
        assert!(matches!(lock.plan(Some(&long), t0 + Duration::from_secs(600), jiff::Timestamp::now()), Plan::HeldByAnother { .. }));
        let short = lease("other", 6, 1, jiff::Timestamp::now());
        lock.plan(Some(&short), t0 + Duration::from_secs(600), jiff::Timestamp::now());
        assert!(holder(&lock.plan(Some(&short), t0 + Duration::from_secs(601), jiff::Timestamp::now())).is_some());
    }

    #[test]
    fn a_released_lease_is_taken_at_once_and_an_own_lease_renewed_keeping_its_acquire_time() {
        let t0 = Instant::now();
        let mut lock = LeaseLock::new("ns", "l", "me", &durations());
        let released = lease("", 7, 1, jiff::Timestamp::now());
        assert_eq!(holder(&lock.plan(Some(&released), t0, jiff::Timestamp::now())).as_deref(), Some("me"));

        let acquired = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(100);
        let mine = lease("me", 8, 15, acquired);
        let plan = lock.plan(Some(&mine), t0, jiff::Timestamp::now());
        let Plan::Update(renewed) = &plan else { panic!("{plan:?}") };
        let spec = renewed.spec.as_ref().unwrap();
        assert_eq!((spec.acquire_time.as_ref().unwrap().0, spec.lease_transitions), (acquired, Some(3)));
        assert_ne!(spec.renew_time.as_ref().unwrap().0, acquired);
    }

    #[test]
    fn after_a_partition_a_lease_taken_by_another_is_not_taken_back() {
        // This replica held it (its own last write), was cut off, and now reads it held by a
        // standby that keeps renewing: it waits a full lease from now, and the standby's next
        // renewal starts that again. Whatever this replica's clock says of renewTime.
        let t0 = Instant::now();
        let mut lock = LeaseLock::new("ns", "l", "me", &durations());
        lock.wrote(&lease("me", 1, 15, jiff::Timestamp::now()), t0);
        let after = t0 + Duration::from_secs(45);
        let standby = lease("standby", 30, 15, jiff::Timestamp::now() - jiff::SignedDuration::from_secs(60));
        let plan = lock.plan(Some(&standby), after, jiff::Timestamp::now());
        assert!(matches!(&plan, Plan::HeldByAnother { holder, .. } if holder == "standby"), "{plan:?}");
        let renewed = lease("standby", 31, 15, jiff::Timestamp::now());
        assert!(matches!(lock.plan(Some(&renewed), after + Duration::from_secs(14), jiff::Timestamp::now()), Plan::HeldByAnother { .. }));
        assert!(matches!(lock.plan(Some(&renewed), after + Duration::from_secs(28), jiff::Timestamp::now()), Plan::HeldByAnother { .. }));
    }

    #[test]
    fn only_the_holder_releases_and_only_its_own_last_record() {
        let lock = LeaseLock::new("ns", "l", "me", &durations());
        let mine = lease("me", 9, 15, jiff::Timestamp::now());
        let released = lock.release(&mine, jiff::Timestamp::now()).unwrap();
        assert_eq!(released.metadata.resource_version.as_deref(), Some("9"));
        let spec = released.spec.unwrap();
        assert_eq!((spec.holder_identity.as_deref(), spec.lease_duration_seconds), (Some(""), Some(1)));
        assert_eq!(lock.release(&lease("other", 9, 15, jiff::Timestamp::now()), jiff::Timestamp::now()), None);
    }
}
