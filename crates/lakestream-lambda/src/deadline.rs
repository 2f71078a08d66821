//! The invocation's deadline as the functions budget against it. Lambda's deadline is always
//! ahead when an invocation starts; one already past is a local emulator's placeholder
//! (`cargo lambda watch` sends `600000`, ten minutes after the epoch, for every invocation),
//! and budgeting against it would stop every invocation before it did anything.

use std::time::{Duration, SystemTime};

/// The most a Lambda invocation can last (the maximum function timeout): the budget of an
/// invocation whose deadline is not a real one.
pub const MAX_INVOCATION: Duration = Duration::from_secs(15 * 60);

/// `deadline` if it is still ahead at `now` (the invocation's start), else `None`: no real
/// deadline, so no time budget beyond [`MAX_INVOCATION`].
pub fn real_deadline(deadline: SystemTime, now: SystemTime) -> Option<SystemTime> {
    (deadline > now).then_some(deadline)
}

/// `deadline` if real (see [`real_deadline`]), else `now` + [`MAX_INVOCATION`], logging once per
/// invocation that the deadline was ignored.
pub fn effective_deadline(deadline: SystemTime, now: SystemTime) -> SystemTime {
    real_deadline(deadline, now).unwrap_or_else(|| {
        tracing::warn!(
            deadline_ms = deadline
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis()),
            "the invocation's deadline is already past at its start (a local runtime emulator's \
             placeholder); budgeting against the 15-minute Lambda maximum instead"
        );
        now + MAX_INVOCATION
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_already_past_is_not_a_real_one() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_000_000);
        // What `cargo lambda watch` sends.
        let emulator = SystemTime::UNIX_EPOCH + Duration::from_millis(600_000);
        assert_eq!(real_deadline(emulator, now), None);
        assert_eq!(effective_deadline(emulator, now), now + MAX_INVOCATION);
        assert_eq!(real_deadline(now, now), None);
        let ahead = now + Duration::from_secs(30);
        assert_eq!(real_deadline(ahead, now), Some(ahead));
        assert_eq!(effective_deadline(ahead, now), ahead);
    }
}
