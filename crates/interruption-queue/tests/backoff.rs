//! The backoff between attempts after errors: growth, cap, reset, and the
//! bounds of an outage.

use std::time::Duration;

use interruption_queue::Backoff;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn the_delay_doubles_from_one_second_up_to_a_minute() {
    let mut backoff = Backoff::default();
    assert_eq!(backoff.delay(), Duration::ZERO);
    let delays: Vec<_> = (0..9).map(|_| backoff.failure().delay).collect();
    assert_eq!(
        delays,
        [1, 2, 4, 8, 16, 32, 60, 60, 60].map(secs),
        "1 s doubling, capped at 1 min"
    );
    assert_eq!(backoff.failures(), 9);
}

#[test]
fn a_success_resets_the_delay_and_ends_the_outage() {
    let mut backoff = Backoff::default();
    assert_eq!(backoff.success(), None, "no outage to end");

    let first = backoff.failure();
    assert!(first.first);
    assert_eq!(first.failures, 1);
    let second = backoff.failure();
    assert!(!second.first, "one log line per outage");
    let third = backoff.failure();
    assert_eq!(third.delay, secs(4));

    assert_eq!(backoff.success(), Some(3));
    assert_eq!(backoff.failures(), 0);
    assert_eq!(backoff.delay(), Duration::ZERO);
    assert_eq!(backoff.success(), None);

    let again = backoff.failure();
    assert!(again.first, "a new outage");
    assert_eq!(again.delay, secs(1));
}

#[test]
fn bounds_can_be_chosen_and_never_overflow() {
    let mut backoff = Backoff::new(Duration::from_millis(250), secs(2));
    let delays: Vec<_> = (0..5).map(|_| backoff.failure().delay).collect();
    assert_eq!(
        delays,
        [250, 500, 1000, 2000, 2000].map(Duration::from_millis)
    );

    // A max below the initial delay is raised to it.
    let mut flat = Backoff::new(secs(5), secs(1));
    assert_eq!(flat.failure().delay, secs(5));
    assert_eq!(flat.failure().delay, secs(5));

    // A long outage stays at the cap.
    let mut long = Backoff::default();
    for _ in 0..1_000 {
        long.failure();
    }
    assert_eq!(long.failure().delay, Backoff::MAX);
    assert_eq!(long.success(), Some(1_001));
}
