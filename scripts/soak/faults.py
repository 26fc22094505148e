"""The faults the soak injects. Each is one function: it breaks something, waits, repairs it,
and returns what it did, so the schedule can log it and the verdict can budget for it."""
import signal
import time

SESSION_TIMEOUT_S = 6


def kill_worker(stack, rng):
    worker_id = rng.choice(sorted(stack.workers.current))
    process = stack.workers.current[worker_id]
    process.kill()
    down = rng.uniform(5, 15)
    time.sleep(down)
    stack.workers.replace(worker_id)
    return {"worker": worker_id, "pid": process.pid, "down_s": round(down, 1), "crash": True}


def zombie_worker(stack, rng):
    """SIGSTOP for longer than the session timeout: the group moves the worker's partitions
    away; SIGCONT brings back a process that still believes it holds them."""
    worker_id = rng.choice(sorted(stack.workers.current))
    process = stack.workers.current[worker_id]
    stopped = SESSION_TIMEOUT_S + rng.uniform(2, 6)
    process.signal(signal.SIGSTOP)
    time.sleep(stopped)
    process.signal(signal.SIGCONT)
    return {"worker": worker_id, "pid": process.pid, "stopped_s": round(stopped, 1), "crash": True}


def broker_down(stack, rng):
    broker = rng.randint(1, 3)
    down = rng.uniform(10, 20)
    stack.kafka.command(f"broker down {broker}")
    time.sleep(down)
    stack.kafka.command(f"broker up {broker}")
    return {"broker": broker, "down_s": round(down, 1)}


def leader_moved(stack, rng):
    topic = rng.choice(["pushfan.tasks", "pushfan.results", "pushfan.campaigns"])
    moved = []
    for partition in rng.sample(range(stack.partitions), 3):
        broker = rng.randint(1, 3)
        stack.kafka.command(f"leader {topic} {partition} {broker}")
        moved.append([partition, broker])
    return {"topic": topic, "partitions_to_brokers": moved}


def postgres_restart(stack, rng):
    stack.postgres.stop()
    down = rng.uniform(1, 4)
    time.sleep(down)
    stack.postgres.start()
    return {"down_s": round(down, 1)}


def api_restart(stack, rng):
    pid = stack.api.process.pid
    stack.api.process.kill()
    down = rng.uniform(1, 4)
    time.sleep(down)
    stack.api.start()
    return {"pid": pid, "down_s": round(down, 1)}


PROCESS_FAULTS = [kill_worker, zombie_worker, broker_down, leader_moved, postgres_restart, api_restart]


# Weather at APNs: short spells between the process faults, each a setting of the
# simulator's fault control for a few seconds, then back to 0 (off).

def apns_spell(stack, rng, lasting, **settings):
    seconds = rng.uniform(*lasting)
    stack.simulator.control(**settings)
    time.sleep(seconds)
    stack.simulator.control(**{name: 0 for name in settings})
    return {**settings, "lasting_s": round(seconds, 1)}


def apns_503_burst(stack, rng):
    return apns_spell(stack, rng, (2, 5), p503=0.5)


def apns_goaway(stack, rng):
    return apns_spell(stack, rng, (3, 6), goaway_after=40)


def apns_dropped_connections(stack, rng):
    return apns_spell(stack, rng, (2, 4), drop_after=60)


APNS_FAULTS = [apns_503_burst, apns_goaway, apns_dropped_connections]


def deck(faults, rng):
    """An endless shuffled deck: every kind comes up once before any comes up twice, so a
    short run still sees each kind."""
    while True:
        cards = list(faults)
        rng.shuffle(cards)
        yield from cards
