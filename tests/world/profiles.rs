//! The profiles end-to-end tests start from: the agent image, a Fargate cluster profile in the
//! test region, and a small valid Fargate elastic profile. Tests add keys to them; a test that
//! needs another shape (EC2, larger tasks) builds its own from [`IMAGE`].

use super::host::Props;
use super::moto::REGION;
use super::props;

/// The agent image of every elastic profile in the tests.
pub const IMAGE: &str = "gocd/gocd-agent-alpine-3.19:v24.1.0";

/// A Fargate cluster profile (the keys of `src/settings/keys.rs`) for `cluster` in the test region, plus `extra`.
pub fn cluster_props(cluster: &str, extra: &[(&str, &str)]) -> Props {
    let mut p = props(&[("ClusterName", cluster), ("Region", REGION)]);
    p.extend(props(extra));
    p
}

/// A small valid Fargate elastic profile (512 CPU units, 1 GiB).
pub fn elastic_props() -> Props {
    props(&[("Image", IMAGE), ("Cpu", "512"), ("Memory", "1024")])
}
