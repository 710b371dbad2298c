//! A sliding-window rate limiter (tool calls per chat).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct RateLimiter {
    window: Duration,
    max: usize,
    recent: VecDeque<Instant>,
}

impl RateLimiter {
    pub fn new(max: usize, window: Duration) -> Self {
        Self {
            window,
            max: max.max(1),
            recent: VecDeque::new(),
        }
    }

    /// Takes one slot now, or says when the next slot frees up.
    pub fn try_acquire(&mut self, now: Instant) -> Result<(), Duration> {
        while let Some(oldest) = self.recent.front() {
            if now.duration_since(*oldest) >= self.window {
                self.recent.pop_front();
            } else {
                break;
            }
        }
        if self.recent.len() >= self.max {
            let oldest = self.recent.front().copied().unwrap_or(now);
            return Err(self.window.saturating_sub(now.duration_since(oldest)));
        }
        self.recent.push_back(now);
        Ok(())
    }

    pub fn describe(&self) -> String {
        format!(
            "at most {} tool calls per {} s in one chat",
            self.max,
            self.window.as_secs()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_slides() {
        let mut limiter = RateLimiter::new(3, Duration::from_secs(60));
        let start = Instant::now();
        for i in 0..3 {
            assert!(limiter.try_acquire(start + Duration::from_secs(i)).is_ok());
        }
        let wait = limiter
            .try_acquire(start + Duration::from_secs(10))
            .unwrap_err();
        assert_eq!(wait, Duration::from_secs(50));
        assert!(limiter.try_acquire(start + Duration::from_secs(60)).is_ok());
    }
}
