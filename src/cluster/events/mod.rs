//! What happens to a cluster profile's tasks and instances without a request: the events ECS and
//! EC2 send through the event queue ([`queue`]). What happened lately, for operators, is
//! [`crate::cluster::base::recent`].

pub mod queue;
