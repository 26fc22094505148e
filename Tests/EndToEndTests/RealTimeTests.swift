import Testing

/// Process tests whose promise is a bound in real time: a parked campaign starts within a
/// second of `send_at`, a cancel or pause stops every request within a second, a zone's
/// wave starts within a second of its local moment. Their suites live in this namespace so
/// they run one at a time, and scripts/test runs them after all the other suites, alone
/// (`swift test --filter RealTimeTests`): then the bound they check is the promise's own,
/// not the load of process-heavy suites beside them on a small machine.
@Suite(.serialized) enum RealTimeTests {}
