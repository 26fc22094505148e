"""The soak's verdict: pure functions from what was recorded during the run to a list of
violations (empty when the promise held) and the numbers for the summary."""
import collections
import json
import statistics


def campaign_ends(campaigns, statuses):
    """Every campaign ended as asked: cancelled when a cancel took effect, else completed."""
    violations = []
    for campaign in campaigns:
        status = statuses.get(campaign.id)
        if campaign.error:
            violations.append(f"{campaign.id}: the workload failed: {campaign.error}")
        elif status != campaign.expected_status():
            violations.append(f"{campaign.id}: {status or 'not in the store'}, expected {campaign.expected_status()} "
                              f"(plan {campaign.plan}, answers {campaign.answers})")
    return violations


def audit_findings(audit_line, campaigns):
    """The audit's JSON line: each campaign audited, and no violation in any."""
    # The audit names a campaign <app>/<id>; the workload's ids are unique across its apps.
    rows = {row["campaign"].split("/", 1)[-1]: row for row in audit_line["audit"]}
    violations = [f"{row['campaign']}: {v}" for row in rows.values() for v in row["violations"]]
    violations += [f"{c.id}: not audited" for c in campaigns if c.id not in rows]
    return violations, rows


def duplicate_budget(rows, crashes, page_size, lanes, dropped_connections, streams):
    """APNs duplicates within four pages per lane per crash, plus what a dropped connection
    had in flight (its outcome unknown to the sender). A killed or stopped worker resends
    what it had on its streams and answered but not yet recorded (docs/ARCHITECTURE.md):
    about a second of its lanes' rate, well inside four pages per lane at the soak's rates."""
    duplicates = sum(row["apns_duplicates"] for row in rows.values())
    budget = crashes * 4 * page_size * lanes + dropped_connections * streams
    violations = [] if duplicates <= budget else [f"{duplicates} APNs duplicates, over the budget of {budget}"]
    return violations, duplicates, budget


def send_times(sim_log_lines, topics):
    """{app: sorted receipt times in ms of its accepted requests} from the simulator's log."""
    by_topic = {topic: app for app, topic in topics.items()}
    times = {app: [] for app in topics}
    for line in sim_log_lines:
        entry = json.loads(line)
        app = by_topic.get(entry["topic"])
        if app:
            times[app].append(entry["time_ms"])
    return {app: sorted(found) for app, found in times.items()}


# The rate is kept where the sender takes its tokens. A window of W ms may hold W of the
# rate plus ALLOWANCE_S of it: the lanes' buckets allow their burst and one batch taken before
# the client started the last (0.1 s), and the simulator sees requests after the transport,
# which delays some more than others (a request waits for a connection that replaces one
# dropped or sent away, the client thread flushes several frames at once: up to 200 ms). A
# sender over its rate shows in the long windows, where the allowance is a small part.
ALLOWANCE_S = 0.3
WINDOWS_MS = (1000, 5000)


def rate_limits(times, rates):
    """Every window of 1 s and of 5 s, wherever it starts, holds at most the app's rate over
    the window and ALLOWANCE_S. Returns the violations and each app's busiest whole second."""
    violations, peaks = [], {}
    for app, stamps in times.items():
        rate = rates[app]
        peaks[app] = max(collections.Counter(t // 1000 for t in stamps).values(), default=0)
        for window in WINDOWS_MS:
            limit = rate * (window / 1000 + ALLOWANCE_S)
            most, at, end = 0, None, 0
            for start, first in enumerate(stamps):
                while end < len(stamps) and stamps[end] < first + window:
                    end += 1
                if end - start > most:
                    most, at = end - start, first
            if most > limit:
                violations.append(f"{app}: {most} requests in the {window} ms from {at}, over {limit:.0f}")
    return violations, peaks


def resource_growth(series, min_samples=6):
    """Processes whose memory or open files grew: the median of the last third of their
    samples against the largest of the first third (after the first, a warm-up)."""
    violations = []
    for name, samples in series.items():
        if len(samples) < min_samples:
            continue
        third = max(2, len(samples) // 3)
        early, late = samples[1:1 + third], samples[-third:]
        rss_early, rss_late = max(s[0] for s in early), statistics.median(s[0] for s in late)
        fds_early, fds_late = max(s[1] for s in early), statistics.median(s[1] for s in late)
        if rss_late > rss_early * 1.25 + 16 * 1024:
            violations.append(f"{name}: resident memory grew from {rss_early // 1024} to {rss_late // 1024} MB")
        if fds_late > fds_early + 16:
            violations.append(f"{name}: open files grew from {fds_early} to {fds_late}")
    return violations


def dead_letters(keys, bad_ids):
    """Only the deliberately bad records were dead-lettered, and each of them was."""
    keys = set(keys)
    violations = [f"dead-lettered although good: {key}" for key in sorted(keys - set(bad_ids))]
    violations += [f"bad record not dead-lettered: {key}" for key in sorted(set(bad_ids) - keys)]
    return violations
