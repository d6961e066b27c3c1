//! The engine's ground: who it is (its identity and the names and tags that mark what is ours), its
//! clock, its locks, the work it runs in the background, how it fails, what happened to it lately, and
//! its port to GoCD.

pub mod background;
pub mod clock;
pub mod error;
pub mod gocd;
pub mod identity;
pub mod locks;
pub mod recent;
pub mod served;
