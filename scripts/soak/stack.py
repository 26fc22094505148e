"""The processes of the soak: the dev cluster, the simulator, the API, the workers and the
private PostgreSQL server, each started as a user would start it, with its own log files."""
import base64
import json
import os
import queue
import shlex
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


class Process:
    """One started binary: its pid, signals, and what /proc says about its memory and files."""

    def __init__(self, name, argv, work, stdin=None):
        self.name, self.argv, self.work = name, argv, work
        self.out_path = os.path.join(work, f"{name}.out")
        self.err_path = os.path.join(work, f"{name}.err")
        self.popen = subprocess.Popen(argv, cwd=work, stdin=stdin, stdout=open(self.out_path, "ab"),
                                      stderr=open(self.err_path, "ab"))
        self.started = time.monotonic()

    @property
    def pid(self):
        return self.popen.pid

    def alive(self):
        return self.popen.poll() is None

    def signal(self, sig):
        if self.alive():
            os.kill(self.pid, sig)

    def terminate(self, timeout=20):
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            return self.popen.wait()

    def kill(self):
        self.signal(signal.SIGKILL)
        self.popen.wait()

    def sample(self):
        """(resident set in KiB, open file descriptors), or None once the process is gone."""
        try:
            with open(f"/proc/{self.pid}/status") as status:
                rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
            return rss, len(os.listdir(f"/proc/{self.pid}/fd"))
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            return None

    def first_line(self, prefix, timeout=60):
        def found():
            if not self.alive():
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode}; see {self.err_path}")
            with open(self.out_path) as out:
                return any(line.startswith(prefix) for line in out)
        wait_for(found, timeout, f"{self.name} to print '{prefix}'")
        with open(self.out_path) as out:
            return next(line.strip() for line in out if line.startswith(prefix))


class DevCluster:
    """`pushfan kafka-dev` with three brokers, driven through its standard input."""

    def __init__(self, pushfan, work, partitions):
        self.bootstrap_file = os.path.join(work, "bootstrap")
        self.process = Process("kafka", [pushfan, "kafka-dev", "--brokers", "3", "--partitions", str(partitions),
                                         "--bootstrap-file", self.bootstrap_file, "--log-level", "warning"],
                               work, stdin=subprocess.PIPE)
        wait_for(lambda: os.path.exists(self.bootstrap_file), 60, "the dev cluster")
        self.brokers = open(self.bootstrap_file).read().strip()
        self.answers = queue.Queue()
        threading.Thread(target=self._read_answers, daemon=True).start()

    def _read_answers(self):
        # The cluster prints its bootstrap servers first, then one answer per command.
        with open(self.process.out_path) as out:
            out.readline()
            while self.process.alive():
                line = out.readline()
                if line:
                    self.answers.put(line.strip())
                else:
                    time.sleep(0.05)

    def command(self, line):
        self.process.popen.stdin.write((line + "\n").encode())
        self.process.popen.stdin.flush()
        answer = self.answers.get(timeout=10)
        if answer != "ok":
            raise RuntimeError(f"kafka-dev refused '{line}': {answer}")


class Simulator:
    def __init__(self, pushfan, work):
        self.work = work
        self.ca = os.path.join(work, "sim-ca.pem")
        self.log = os.path.join(work, "sim.ndjson")
        self.process = Process("apns-sim", [pushfan, "apns-sim", "--port", "0", "--accept-any-key", "--ca-out", self.ca,
                                            "--log", self.log, "--latency", "1-8", "--log-level", "warning"], work)
        self.url = self.process.first_line("apns-sim listening on ").split(" on ")[1]

    def _curl(self, path, body=None):
        argv = ["curl", "-sS", "--fail", "--http2", "--cacert", self.ca, f"{self.url}{path}"]
        if body is not None:
            argv += ["-d", json.dumps(body)]
        return json.loads(subprocess.run(argv, check=True, capture_output=True, timeout=10).stdout)

    def control(self, **settings):
        return self._curl("/_sim/control", settings)

    def stats(self):
        return self._curl("/_sim/stats")


class Postgres:
    """The private server of scripts/with-postgres: restarted by its own pg_ctl."""

    def __init__(self):
        self.url = os.environ["PUSHFAN_TEST_POSTGRES"]
        self.ctl = shlex.split(os.environ["PUSHFAN_TEST_PG_CTL"])

    def create_database(self, name):
        self.psql(f"CREATE DATABASE {name}")
        return self.url.rsplit("/", 1)[0] + "/" + name

    def psql(self, sql, url=None):
        return subprocess.run(["psql", "-X", "-At", "-v", "ON_ERROR_STOP=1", url or self.url, "-c", sql],
                              check=True, capture_output=True, text=True, timeout=30).stdout

    # No pipes: the server pg_ctl starts would inherit them and a read to their end would
    # never finish.
    def stop(self):
        subprocess.run(self.ctl + ["-m", "fast", "-w", "stop"], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)

    def start(self):
        subprocess.run(self.ctl + ["-w", "start"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=60)


class API:
    def __init__(self, pushfan, work, argv):
        self.pushfan, self.work, self.argv = pushfan, work, argv
        self.port = free_port()
        self.process = None
        self.restarts = 0

    def start(self):
        name = "api" if self.restarts == 0 else f"api-{self.restarts}"
        self.process = Process(name, [self.pushfan, "api", "--port", str(self.port)] + self.argv, self.work)
        self.process.first_line("api listening on ")
        self.restarts += 1

    def request(self, method, path, user, secret, body=None, headers=None, timeout=15):
        """(status, decoded body); status 0 when nothing answered (the API is down)."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json", **(headers or {})})
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode())
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return 0, None


class Workers:
    """The worker processes by id; a restarted worker keeps its id and gets a new log."""

    def __init__(self, pushfan, work, argv):
        self.pushfan, self.work, self.argv = pushfan, work, argv
        self.current = {}
        self.generations = {}
        self.retired = []

    def start(self, worker_id):
        generation = self.generations.get(worker_id, 0) + 1
        self.generations[worker_id] = generation
        name = f"{worker_id}-{generation}"
        self.current[worker_id] = Process(name, [self.pushfan, "worker", "--id", worker_id] + self.argv, self.work)
        return self.current[worker_id]

    def replace(self, worker_id):
        self.retired.append(self.current.pop(worker_id))
        return self.start(worker_id)

    def all(self):
        return self.retired + list(self.current.values())
