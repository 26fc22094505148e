#!/usr/bin/env python3
"""The chaos soak (scripts/chaos runs it inside scripts/with-postgres). Starts the whole
stack, runs overlapping campaigns while faults come every 20-40 s, then checks the promise:
see scripts/chaos for what is checked and the summary line."""
import json
import os
import random
import subprocess
import sys
import threading
import time

import checks
import faults
from stack import API, DevCluster, Postgres, Simulator, Workers, wait_for
from workload import Workload

DURATION = int(os.environ.get("DURATION", "300"))
SEED = int(os.environ.get("SEED", str(random.randrange(1 << 30))))
PUSHFAN = os.environ["PUSHFAN"]
WORK = os.environ["CHAOS_WORK"]
APPS = {"alpha": {"rate": 150, "devices": 3000, "offset": 0},
        "beta": {"rate": 50, "devices": 1000, "offset": 100000}}
PAGE_SIZE, SHARD_SIZE, LANES, STREAMS, PARTITIONS, WORKERS = 100, 500, 4, 100, 48, 3
BAD_RECORDS = ["chaos-bad-0001"]
started = time.monotonic()


def log(message):
    print(f"[chaos {time.monotonic() - started:6.0f}s] {message}", file=sys.stderr, flush=True)


class Stack:
    def __init__(self):
        self.pushfan, self.work, self.partitions = PUSHFAN, WORK, PARTITIONS
        self.postgres = Postgres()
        self.database = self.postgres.create_database("chaos")
        self.secrets = {}
        config = os.path.join(WORK, "config.json")
        with open(config, "w") as out:
            json.dump({"worker": {"page_size": PAGE_SIZE, "shard_size": SHARD_SIZE, "lease_s": 15, "lanes": LANES},
                       "kafka": {"properties": {"session.timeout.ms": str(faults.SESSION_TIMEOUT_S * 1000),
                                                "heartbeat.interval.ms": "500"}}}, out)
        self.config = config

    def setup_apps(self):
        key = os.path.join(WORK, "key.p8")
        subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key],
                       check=True, capture_output=True)
        for app, facts in APPS.items():
            added = subprocess.run([PUSHFAN, "apps", "add", "--database", self.database, "--app", app,
                                    "--topic", f"com.example.{app}", "--team-id", "TEAM000001", "--key-id", "KEY0000001",
                                    "--key-file", key, "--rate", str(facts["rate"]), "--log-level", "warning"],
                                   check=True, capture_output=True, text=True).stdout
            self.secrets[app] = next(line.split(": ")[1] for line in added.splitlines() if line.startswith("master secret"))
            devices = os.path.join(WORK, f"{app}.ndjson")
            with open(devices, "wb") as out:
                subprocess.run(["python3", "scripts/bench/devices.py", str(facts["devices"]), str(facts["offset"])],
                               check=True, stdout=out)
            subprocess.run([PUSHFAN, "devices", "import", "--database", self.database, "--app", app, devices,
                            "--log-level", "warning"], check=True, capture_output=True)

    def start(self):
        self.kafka = DevCluster(PUSHFAN, WORK, PARTITIONS)
        self.simulator = Simulator(PUSHFAN, WORK)
        common = ["--database", self.database, "--brokers", self.kafka.brokers, "--config", self.config]
        self.api = API(PUSHFAN, WORK, common + ["--log-level", "notice"])
        self.api.start()
        self.workers = Workers(PUSHFAN, WORK, common + ["--url", self.simulator.url, "--ca-file", self.simulator.ca,
                                                       "--log-level", "info"])
        for n in range(1, WORKERS + 1):
            self.workers.start(f"w{n}")

    def processes(self):
        return self.workers.all() + [self.api.process]

    def stop(self):
        for name in ("workers", "api", "simulator", "kafka"):
            part = getattr(self, name, None)
            if part is None:
                continue
            for process in (part.all() if name == "workers" else [part.process]):
                if process is not None:
                    process.terminate()


def every(interval, rng, stop, action):
    """Starts action a random interval after its last start (or once it has ended, if it
    takes longer) until stop is set; returns the thread."""
    def loop():
        last = time.monotonic()
        while not stop.wait(max(0.0, last + rng.uniform(*interval) - time.monotonic())):
            last = time.monotonic()
            action()
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def main():
    log(f"seed {SEED}, {DURATION} s")
    stack = Stack()
    try:
        return soak(stack)
    finally:
        stack.stop()


def soak(stack):
    stack.setup_apps()
    stack.start()
    wait_for(lambda: sum(open(p.err_path).read().count("event=kafka.assigned") for p in stack.workers.all()) >= 3 * WORKERS,
             90, "the workers to join their groups")
    log(f"stack up: brokers {stack.kafka.brokers}, simulator {stack.simulator.url}, api :{stack.api.port}")
    subprocess.run(["kcat", "-P", "-b", stack.kafka.brokers, "-t", "pushfan.campaigns", "-k", BAD_RECORDS[0]],
                   input=b"{not a campaign", check=True, timeout=60)

    stop = threading.Event()
    workload = Workload(stack, random.Random(SEED), log)
    injected, samples = [], {}
    lock = threading.Lock()

    def inject(fault, rng):
        at = int(time.time() * 1000)
        try:
            facts = fault(stack, rng)
        except Exception as error:
            facts = {"error": repr(error)}
        with lock:
            injected.append({"fault": fault.__name__, "at_ms": at, **facts})
        log(f"fault {fault.__name__}: {facts}")

    process_deck = faults.deck(faults.PROCESS_FAULTS, random.Random(SEED + 1))
    apns_deck = faults.deck(faults.APNS_FAULTS, random.Random(SEED + 2))
    fault_rng, apns_rng = random.Random(SEED + 3), random.Random(SEED + 4)
    app_rng = random.Random(SEED + 5)

    def sample():
        for process in stack.processes():
            reading = process.sample()
            if reading:
                samples.setdefault(process.name, []).append(reading)

    def progress():
        statuses = statuses_in_store(stack)
        finished = sum(1 for c in workload.campaigns if statuses.get(c.id) in ("completed", "cancelled"))
        log(f"{len(workload.campaigns)} campaigns submitted, {finished} finished, {len(injected)} faults injected")

    threads = [
        every((5, 10), app_rng, stop, lambda: workload.launch("alpha" if app_rng.random() < 0.6 else "beta")),
        every((20, 40), fault_rng, stop, lambda: inject(next(process_deck), fault_rng)),
        every((10, 20), apns_rng, stop, lambda: inject(next(apns_deck), apns_rng)),
        every((10, 10), random.Random(), stop, sample),
        every((30, 30), random.Random(), stop, progress),
    ]
    workload.launch("alpha")
    stop.wait(DURATION)
    stop.set()
    log("faults and submissions stop; waiting for every campaign to end")
    for thread in threads:
        thread.join()
    sample()
    stuck = workload.join(600)
    ends = wait_for_ends(stack, workload.campaigns, timeout=900)
    summary = verdict(stack, workload, injected, samples, ends, stuck)
    print(json.dumps(summary, separators=(",", ":")), flush=True)
    return 1 if summary["violations"] else 0


def statuses_in_store(stack):
    try:
        rows = stack.postgres.psql("SELECT id, status FROM campaigns", url=stack.database)
    except subprocess.SubprocessError:
        return {}
    # The store names a campaign <app>/<id>; the workload's ids are unique across its apps.
    return {key.split("/", 1)[-1]: status for key, status in (line.split("|", 1) for line in rows.splitlines() if "|" in line)}


def wait_for_ends(stack, campaigns, timeout):
    deadline = time.monotonic() + timeout
    while True:
        statuses = statuses_in_store(stack)
        open_ones = [c.id for c in campaigns if statuses.get(c.id) not in ("completed", "cancelled")]
        if not open_ones or time.monotonic() > deadline:
            return statuses
        log(f"waiting for {len(open_ones)} campaigns: {open_ones[:5]}")
        time.sleep(5)


def audit(stack):
    done = subprocess.run([PUSHFAN, "audit", "--all", "--sim-log", stack.simulator.log, "--database", stack.database,
                           "--brokers", stack.kafka.brokers, "--timeout", "300", "--log-level", "warning"],
                          capture_output=True, text=True)
    sys.stderr.write(done.stdout.split("\n{")[0] + "\n")
    lines = done.stdout.strip().splitlines()
    if not lines or not lines[-1].startswith("{"):
        # Exit 2: a source could not be read. The verdict reports it as a violation.
        return {"audit": [], "error": f"exit {done.returncode}: {done.stderr.strip()[-500:]}"}
    return json.loads(lines[-1])


def dead_letter_keys(stack):
    done = subprocess.run(["kcat", "-C", "-b", stack.kafka.brokers, "-t", "pushfan.deadletter", "-e", "-q",
                           "-o", "beginning", "-f", "%k\n"], capture_output=True, text=True, timeout=120)
    return [key for key in done.stdout.splitlines() if key]


def verdict(stack, workload, injected, samples, ends, stuck):
    campaigns = workload.campaigns
    violations = [f"{c.id}: its workload thread did not finish" for c in stuck]
    violations += checks.campaign_ends(campaigns, ends)
    audit_line = audit(stack)
    found, rows = checks.audit_findings(audit_line, campaigns)
    violations += found + ([f"the audit did not finish: {audit_line['error']}"] if "error" in audit_line else [])
    crashes = sum(1 for fault in injected if fault.get("crash"))
    dropped = stack.simulator.stats()["dropped_connections"]
    over, duplicates, budget = checks.duplicate_budget(rows, crashes, PAGE_SIZE, LANES * len(APPS), dropped, STREAMS)
    violations += over
    with open(stack.simulator.log) as sim_log:
        times = checks.send_times(sim_log, {app: f"com.example.{app}" for app in APPS})
    over, peaks = checks.rate_limits(times, {app: facts["rate"] for app, facts in APPS.items()})
    violations += over
    violations += checks.resource_growth(samples)
    violations += checks.dead_letters(dead_letter_keys(stack), BAD_RECORDS)
    violations += [f"fault {f['fault']} failed: {f['error']}" for f in injected if "error" in f]
    for line in violations:
        log(f"VIOLATION {line}")
    kinds = {}
    for fault in injected:
        kinds[fault["fault"]] = kinds.get(fault["fault"], 0) + 1
    peak_rss = max((s[0] for series in samples.values() for s in series), default=0)
    return {"chaos": "soak", "seed": SEED, "duration_s": DURATION, "faults": len(injected), "fault_kinds": kinds,
            "campaigns": len(campaigns), "cancelled": sum(1 for c in campaigns if c.expected_status() == "cancelled"),
            "paused_resumed": sum(1 for c in campaigns if any(a == "resume" for a, _ in c.answers)),
            "devices": sum(row["devices"] for row in rows.values()), "violations": len(violations),
            "apns_duplicates": duplicates, "duplicate_budget": budget,
            "result_duplicates": sum(row["duplicate_results"] for row in rows.values()),
            "peak_sends_per_s": peaks, "peak_rss_mb": round(peak_rss / 1024, 1),
            "processes_sampled": len(samples)}


if __name__ == "__main__":
    sys.exit(main())
