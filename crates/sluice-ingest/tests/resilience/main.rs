//! Resilience of the whole pipeline over a real Delta table on disk, with faults injected at
//! the object-store seam: every crash point of a scripted run (E1, E2), seeded transient
//! faults with retries, zombie writers (E3), and recovery after log cleanup (E4).

mod crash_points;
mod harness;
mod history;
mod mirror;
mod modes;
mod notified;
mod same_files;
mod transient;
mod zombie;
