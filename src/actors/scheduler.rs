//! Scheduler: cron / interval / one-shot jobs (built out by the scheduler work).
//!
//! The interface other parts rely on: a scheduled run's final answer arrives here as
//! `SchedulerMsg::Deliver(Outbound)` for a `sched:<job_id>` chat (routed by `channels::deliver`).

use crate::domain::Outbound;

pub enum SchedulerMsg {
    /// Output of a scheduled run (its session's chat is `sched:<job_id>`).
    Deliver(Outbound),
}
