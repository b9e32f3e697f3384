"""The agent as the chart ships it, started on this host.

The DaemonSet runs `shadowtune agent` in a pod: its own PID namespace
(hostPID: false), a 256 MiB memory limit, the state directory, the metrics
port, --tracer=auto; nothing else. `shadowtune run` is the same agent
without Kubernetes. Here it runs under `unshare --pid --fork --mount-proc`
(a PID namespace of its own, as in the pod) in a memory cgroup with the
chart's limit, with a policy that sets only spec.mode: Apply and
spec.devices.include: [the loop device], and with no flags but the state
directory, a metrics address on 127.0.0.1 and -o json. The benchmark
depends only on its CLI, its JSON report and its log lines; what it did is
also read from the device itself (DevicePoller).
"""
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request

from . import counterfactual
from .host import BenchError, free_port, in_pod, log

# The chart's agent.terminationGracePeriodSeconds: the time it has after
# SIGTERM to restore the devices it changed.
GRACE_S = 60


def policy_yaml(device, extra, mode="Apply"):
    """The StorageTuning policy: spec.mode (Apply; Observe for the
    counterfactual's predictions) and the one device; the CRD's defaults
    for everything else. extra (a non-default run only) adds keys to spec,
    each written as JSON (which YAML reads)."""
    lines = ["apiVersion: storage.shadowtune.io/v1alpha1", "kind: StorageTuning", "metadata:",
             "  name: bench-decisions", "spec:", f"  mode: {mode}", "  devices:",
             f"    include: [{json.dumps(device)}]"]
    for k, v in sorted((extra or {}).items()):
        lines.append(f"  {k}: {json.dumps(v, sort_keys=True)}")
    return "\n".join(lines) + "\n"


class DevicePoller(threading.Thread):
    """Polls the device's scheduler and read_ahead_kb every 100 ms and
    records every change with its time: what the agent did, seen from the
    device, whatever its logs say."""

    def __init__(self, dev, period=0.1):
        super().__init__(daemon=True)
        self.dev, self.period = dev, period
        self.stopped = threading.Event()
        self.changes = []  # (epoch seconds, "sched/ra")
        self.lock = threading.Lock()

    def run(self):
        last = None
        while not self.stopped.is_set():
            try:
                s, ra = self.dev.state()
                cur = f"{s}/{ra}"
            except (OSError, ValueError):
                cur = None
            if cur != last and cur is not None:
                with self.lock:
                    self.changes.append((time.time(), cur))
                last = cur
            self.stopped.wait(self.period)

    def since(self, t0, t1=None):
        with self.lock:
            return [(t, s) for t, s in self.changes if t >= t0 and (t1 is None or t <= t1)]

    def stop(self):
        self.stopped.set()
        self.join()


KV_RE = re.compile(r'"([A-Za-z]+)"=("(?:[^"\\]|\\.)*"|\[[^\]]*\]|[^ ]+)')


METRIC_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ([^ ]+)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """Prometheus' text format as {(name, sorted label pairs): value};
    comments and lines in another form are left out."""
    out = {}
    for line in text.splitlines():
        mt = METRIC_RE.match(line)
        if not mt:
            continue
        labels = tuple(sorted(LABEL_RE.findall(mt.group(2) or "")))
        try:
            out[(mt.group(1), labels)] = float(mt.group(3))
        except ValueError:
            pass
    return out


def parse_log_line(line):
    """The key/values of one of the agent's log lines (logr funcr's
    "key"="value" form); {} for a line in another form."""
    out = {}
    for k, v in KV_RE.findall(line):
        if v.startswith('"'):
            try:
                v = json.loads(v)
            except json.JSONDecodeError:
                v = v[1:-1]
        out[k] = v
    return out


class Agent:
    """The agent (setting "agent"), or a variant of it (setting agent.V: the
    binary BINARY.V beside it, e.g. a wrapper from hack/bench-variants; a
    non-default agent, so its run is never a headline), or the agent in
    Observe mode (setting "observe": the device stays at its defaults, and
    the agent's predictions for every candidate are read from its metrics
    around each workload, for the counterfactual)."""

    def __init__(self, binary, dev, pods, tmp, plan, setting="agent"):
        self.bin, self.dev, self.pods, self.tmp, self.plan = binary, dev, pods, tmp, plan
        self.setting = setting
        if setting.startswith("agent."):
            self.bin = binary + setting[len("agent"):]
        self.files = pods.pod(setting, plan["agent_memory"], agent=True)
        self.proc = None
        observe = setting == "observe"
        self.policy = os.path.join(tmp, "policy-observe.yaml" if observe else "policy.yaml")
        with open(self.policy, "w") as f:
            f.write(policy_yaml(dev.name, plan["agent"].get("policy_extra"), "Observe" if observe else "Apply"))
        self.kept_state = os.path.join(tmp, "agent-state")

    def argv(self, state, record=False):
        """The agent's command line (for the record: the policy's and the
        port's place holders)."""
        if not record:
            self.port = free_port()
        return [self.bin, "run", "--config", "policy.yaml" if record else self.policy, "--state-dir", state,
                "-o", "json", "--metrics-bind-address", "127.0.0.1:PORT" if record else f"127.0.0.1:{self.port}",
                *self.plan["agent"].get("args", [])]

    def ready(self):
        """The pod's readiness probe: GET /readyz answers 200 once the
        agent traces."""
        try:
            with self.get("/readyz", 1) as r:
                return r.status == 200
        except (OSError, ValueError):
            return False

    def get(self, path, timeout):
        """GET path from the agent's metrics server, never through a proxy."""
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        return direct.open(f"http://127.0.0.1:{self.port}{path}", timeout=timeout)

    def start(self, seqdir):
        """Starts the agent for one sequence; returns when it is ready (its
        /readyz, as the pod's readiness probe sees it)."""
        if self.plan["agent"].get("state_dir") == "kept":
            self.state = self.kept_state + self.setting[len("agent"):]
        else:
            self.state = os.path.join(seqdir, "agent-state")
        os.makedirs(self.state, exist_ok=True)
        self.log_path = os.path.join(seqdir, "agent.log")
        self.json_path = os.path.join(seqdir, "agent.json")
        self.out = open(self.json_path, "w")
        self.err = open(self.log_path, "w")
        ns = [] if self.plan["agent"].get("host_pid") else ["unshare", "--pid", "--fork", "--mount-proc"]
        cmd = in_pod(self.files, [*ns, *self.argv(self.state)])
        self.t_start = time.time()
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=self.err, start_new_session=True)
        t = time.monotonic()
        while time.monotonic() - t < 60:
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self.close_files()
                tail = open(self.log_path, errors="replace").read().strip().splitlines()[-2:]
                self.proc = None
                raise BenchError(f"the agent exited at start (exit {rc}): {' | '.join(tail)}")
            if self.ready() or self.traces():
                self.t_ready = time.time()
                return
            time.sleep(0.1)
        raise BenchError("the agent was not ready (/readyz) within 60 s")

    def scrape(self):
        """The agent's /metrics as {(name, ((label, value), ...)): value}."""
        with self.get("/metrics", 5) as r:
            return parse_metrics(r.read().decode())

    def after_window(self, timeout=20):
        """The agent's metrics once a window of the device has closed after
        the call, evaluated or skipped: every request issued before the
        call is then in them. The window's figures are exported right after
        its evaluation is counted, so they are read half a second later."""
        def windows(m):
            d = counterfactual.windows(m, self.dev.name)
            return d["windows"] + d["skipped"]

        first = windows(self.scrape())
        end = time.monotonic() + timeout
        while windows(self.scrape()) <= first:
            if time.monotonic() > end:
                raise BenchError(f"no window of {self.dev.name} closed within {timeout} s")
            time.sleep(0.2)
        time.sleep(0.5)
        return self.scrape()

    def pid(self):
        """The agent's own host PID: the child of unshare (or the process
        itself, in the host's PID namespace)."""
        if self.plan["agent"].get("host_pid"):
            return self.proc.pid
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                kids = f.read().split()
            return int(kids[0]) if kids else None
        except (OSError, ValueError):
            return None

    def traces(self):
        """A variant without the metrics server (hack/null-agent.sh) says
        so in its log instead."""
        with open(self.log_path, errors="replace") as f:
            return '"msg"="tracing"' in f.read()

    def cpu_s(self):
        """CPU seconds of the agent's pod so far (its processes' threads)."""
        total = 0
        for p in self.pods.procs(self.setting):
            try:
                for t in os.listdir(f"/proc/{p}/task"):
                    with open(f"/proc/{p}/task/{t}/schedstat") as f:
                        total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        return total / 1e9

    def close_files(self):
        for f in (self.out, self.err):
            if not f.closed:
                f.close()

    def stop(self):
        """SIGTERM to the agent (it restores the device), as a pod's
        termination does; SIGKILL and `run --revert` after the grace
        period. Returns a summary: exit status, its JSON report, its log's
        changes."""
        if self.proc is None:
            return None
        pid = self.pid()
        rc = None
        if pid:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            rc = self.proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            log(f"the agent did not exit within {GRACE_S} s of SIGTERM: SIGKILL and run --revert")
            self.pods.kill(self.setting, grace=0)
            self.proc.wait()
            rc = "killed"
            subprocess.run([self.bin, "run", "--revert", "--state-dir", self.state],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.proc = None
        self.close_files()
        return self.summary(rc)

    def summary(self, rc):
        events = []
        for line in open(self.log_path, errors="replace"):
            kv = parse_log_line(line)
            if "change" in kv or kv.get("msg", "").startswith(("applied", "restored", "revert")):
                events.append({k: kv[k] for k in ("msg", "device", "change") if k in kv})
        report = None
        try:
            with open(self.json_path) as f:
                report = json.load(f)
        except (OSError, json.JSONDecodeError):
            pass
        dev = {}
        if report:
            for d in report.get("devices", []):
                if d.get("name") == self.dev.name:
                    dev = {k: d.get(k) for k in ("changes", "reverts", "lastChange", "lastVerification",
                                                 "recommendation", "readAhead", "class")}
        return {"exit": rc, "windows": (report or {}).get("windows"), "notes": (report or {}).get("notes", []),
                "log_events": events, "device_report": dev}

    def kill(self):
        """At cleanup: an agent still running is stopped (it restores)."""
        if self.proc is not None:
            self.stop()
