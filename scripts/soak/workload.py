"""What the soak asks of the stack: overlapping campaigns of two apps, submitted through the
API or straight onto the campaigns topic, some cancelled, some paused and resumed. Each
campaign runs in its own thread, retrying as a marketing tool would while a fault lasts, and
keeps what it was told so the verdict can say what its end should be."""
import json
import subprocess
import threading
import time

SEGMENTS = [
    "locale = en_US or locale != en_US",
    "tag:sports",
    "tag:news or tag:vip",
    "locale in (de_DE, de_AT, fr_FR, es_ES)",
    "not tag:weekly",
]


class Campaign:
    def __init__(self, number, app, rng):
        self.id = f"chaos-{number:04d}-{app}"
        self.app = app
        self.segment = rng.choice(SEGMENTS)
        self.channel = rng.choice(["api", "kafka"])
        roll = rng.random()
        self.plan = "cancel" if roll < 0.15 else "pause" if roll < 0.3 else "complete"
        self.control_channel = rng.choice(["api", "cli"])
        self.waits = [rng.uniform(2, 8), rng.uniform(5, 15)]
        self.submitted_ms = None
        self.answers = []  # (action, outcome) as the stack answered them
        self.error = None

    def record(self):
        return {"v": 1, "id": self.id, "app": self.app, "audience": {"segment": self.segment},
                "notification": {"push_type": "alert",
                                 "content": {"default": {"title": "Chaos soak", "body": f"Campaign {self.id}"}}},
                "submitted_at": int(time.time() * 1000)}

    def expected_status(self):
        """completed, or cancelled when a cancel took effect before the campaign finished
        ('already' is the answer to a retry whose first try took effect unanswered)."""
        cancelled = any(action == "cancel" and outcome in ("moved", "already") for action, outcome in self.answers)
        return "cancelled" if cancelled else "completed"


class Workload:
    def __init__(self, stack, rng, log):
        self.stack, self.rng, self.log = stack, rng, log
        self.campaigns = []
        self.threads = []

    def launch(self, app):
        campaign = Campaign(len(self.campaigns) + 1, app, self.rng)
        self.campaigns.append(campaign)
        thread = threading.Thread(target=self._run, args=(campaign,), daemon=True)
        thread.start()
        self.threads.append(thread)
        return campaign

    def join(self, timeout):
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [c for c, t in zip(self.campaigns, self.threads) if t.is_alive()]

    def _run(self, campaign):
        try:
            self._submit(campaign)
            if campaign.plan == "cancel":
                time.sleep(campaign.waits[0])
                self._control(campaign, "cancel")
            elif campaign.plan == "pause":
                time.sleep(campaign.waits[0])
                if self._control(campaign, "pause") in ("moved", "already"):
                    time.sleep(campaign.waits[1])
                    self._control(campaign, "resume")
        except Exception as error:  # the verdict reports it; the soak goes on
            campaign.error = repr(error)
            self.log(f"campaign {campaign.id}: {error!r}")

    def _submit(self, campaign):
        record = campaign.record()
        campaign.submitted_ms = record["submitted_at"]
        for attempt in range(120):
            if campaign.channel == "api":
                secret = self.stack.secrets[campaign.app]
                status, body = self.stack.api.request("POST", f"/v1/apps/{campaign.app}/campaigns", campaign.app, secret,
                                                      record, headers={"Idempotency-Key": campaign.id})
                if status == 202:
                    return
                if status not in (0, 503):
                    raise RuntimeError(f"the API refused the campaign: {status} {body}")
            else:
                done = subprocess.run(["kcat", "-P", "-b", self.stack.kafka.brokers, "-t", "pushfan.campaigns",
                                       "-k", campaign.id, "-X", "message.timeout.ms=60000"],
                                      input=json.dumps(record, separators=(",", ":")).encode(),
                                      capture_output=True, timeout=90)
                if done.returncode == 0 and not done.stderr.strip():
                    return
            time.sleep(1)
        raise RuntimeError("not submitted after 120 attempts")

    def _control(self, campaign, action):
        """Sends the command until the stack decides: 'moved', 'already' or 'refused'."""
        for _ in range(180):
            outcome = self._api_control(campaign, action) if campaign.control_channel == "api" \
                else self._cli_control(campaign, action)
            if outcome is not None:
                campaign.answers.append((action, outcome))
                return outcome
            time.sleep(1)
        raise RuntimeError(f"{action} not decided after 180 attempts")

    def _api_control(self, campaign, action):
        status, body = self.stack.api.request("POST", f"/v1/apps/{campaign.app}/campaigns/{campaign.id}/{action}",
                                              campaign.app, self.stack.secrets[campaign.app])
        if status == 200:
            return "already" if body.get("changed") is False else "moved"
        if status == 409:
            return "refused"
        return None  # down, 404 before the planner has read it, 503 while the store restarts

    def _cli_control(self, campaign, action):
        done = subprocess.run([self.stack.pushfan, "campaigns", action, f"{campaign.app}/{campaign.id}", "--database", self.stack.database,
                               "--brokers", self.stack.kafka.brokers, "--log-level", "error"],
                              capture_output=True, text=True, timeout=120)
        if done.returncode == 0:
            return "already" if "nothing changed" in done.stdout else "moved"
        if "no campaign" in done.stderr or "unavailable" in done.stderr or "connection" in done.stderr.lower():
            return None
        return "refused" if "nothing changed" in done.stderr else None
