"""make bench-decisions: runs a plan and writes its record to docs/runs.

The record (docs/runs/DATE-NAME.json) is written with the plan, the git
commit, the kernel, the date and the host's facts before the first
workload starts, then again after every measurement, so a run cut short
keeps what it measured and says so. At the end (also after an error or
^C, once everything the run created is put back) the report
(DATE-NAME.md) and the index (docs/runs/README.md) are generated from it.
"""
import datetime
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from . import counterfactual
from . import plan as planmod
from . import report
from .agent import Agent, DevicePoller
from .host import BenchError, Cleanup, Device, Pods, drop_caches, ensure_packages, host_facts, log
from .workloads import PACKAGES, Apps, needs

FORMAT = 1


def williams_order(n, r):
    """Row r of a Williams design for n treatments (hack/lib/williams.sh,
    tested by hack/benchorder): row 0 is 0, 1, n-1, 2, n-2, ...; row r adds
    r (mod n); for an odd n rows n..2n-1 are rows 0..n-1 reversed."""
    period = 2 * n if n % 2 else n
    r %= period
    b, lo, hi = [0], 1, n - 1
    for j in range(1, n):
        if j % 2:
            b.append(lo)
            lo += 1
        else:
            b.append(hi)
            hi -= 1
    if r < n:
        return [(b[j] + r) % n for j in range(n)]
    return [(b[n - 1 - j] + r - n) % n for j in range(n)]


def git_facts(repo):
    def g(*args):
        r = subprocess.run(["git", "-C", repo, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return r.stdout.strip()
    return {"commit": g("rev-parse", "HEAD"), "branch": g("rev-parse", "--abbrev-ref", "HEAD"),
            "dirty": bool(g("status", "--porcelain", "--untracked-files=no"))}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


class Record:
    def __init__(self, path, data):
        self.path, self.data = path, data

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, sort_keys=False)
            f.write("\n")
        os.replace(tmp, self.path)


def run_path(runs_dir, name, now):
    base = f"{now:%Y-%m-%d}-{name}"
    p, i = os.path.join(runs_dir, base + ".json"), 2
    while os.path.exists(p):
        p = os.path.join(runs_dir, f"{base}-{i}.json")
        i += 1
    return p


def main(binary, env, repo, helper):
    try:
        plan = planmod.from_env(env)
    except planmod.PlanError as e:
        print(f"bench-decisions: {e}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("bench-decisions: run as root (loop device, mount, cgroups, drop_caches, eBPF)", file=sys.stderr)
        return 2
    binary = os.path.realpath(binary)
    if not os.access(binary, os.X_OK):
        print(f"bench-decisions: {binary}: not an executable", file=sys.stderr)
        return 2
    if isinstance(plan["settings"], list):
        for s in plan["settings"]:
            if s.startswith("agent.") and not os.access(binary + s[len("agent"):], os.X_OK):
                print(f"bench-decisions: setting {s} runs {binary + s[len('agent'):]}, which is not an executable",
                      file=sys.stderr)
                return 2
    runs_dir = env.get("BENCH_RUNS_DIR") or os.path.join(repo, "docs", "runs")
    os.makedirs(runs_dir, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    path = run_path(runs_dir, plan["name"], now)
    rec = Record(path, {
        "format": FORMAT, "name": os.path.basename(path)[:-5],
        "status": "setup", "started": now.isoformat(timespec="seconds"), "plan": plan,
        "git": git_facts(repo), "host": host_facts(),
        "agent_binary": {"path": os.path.relpath(binary, repo) if binary.startswith(repo) else binary,
                         "sha256": sha256(binary),
                         "version": subprocess.run([binary, "version"], stdout=subprocess.PIPE, text=True).stdout.strip()},
        "agent_deviations": planmod.agent_deviations(plan),
        "measurements": [], "sequences": [],
    })
    rec.save()
    log(f"plan {plan['name']} ({plan.get('source')}) declared in {os.path.relpath(rec.path, repo)}")
    print(json.dumps({"plan": plan, "git": rec.data["git"], "host": rec.data["host"]}, indent=1), flush=True)

    cleanup = Cleanup()

    def on_signal(sig, _frame):
        raise KeyboardInterrupt(signal.Signals(sig).name)
    # Also SIGINT: a shell that starts the run in the background ignores
    # it for its children, and Python then leaves it ignored.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    status, why = "failed", ""
    tmp = None
    try:
        pk = {}
        for app in needs(plan["workloads"]):
            pk.update(PACKAGES[app])
        rec.data["installed"] = ensure_packages(pk, cleanup)
        tmp = tempfile.mkdtemp(prefix="shadowtune-bench-decisions.", dir=env.get("BENCH_DIR") or "/var/tmp")
        cleanup.push(f"remove {tmp}", lambda: keep_and_remove(tmp, env.get("BENCH_KEEP")))
        dev = Device(tmp, plan["sizes"]["image_gib"], cleanup, env.get("BENCH_DEFAULT_SCHEDULER") or "none")
        default = f"{dev.default_sched}/{dev.ra0}"
        settings = planmod.resolve_settings(plan, dev.offered, dev.default_sched, dev.ra0)
        pods = Pods(f"shadowtune-bench-decisions.{os.getpid()}", dev.majmin, plan["throttle"], cleanup)
        rec.data.update(settings=settings, default_setting=default,
                        device={"name": dev.name, "image_gib": plan["sizes"]["image_gib"], "dio": True,
                                "offered_schedulers": dev.offered, "default_read_ahead_kb": dev.ra0,
                                "fs": "ext4 (noatime)"},
                        cgroups={"version": pods.version, "throttle_at": pods.throttle_where},
                        headline_blockers=planmod.headline_blockers(plan, settings, dev.offered,
                                                                   dev.default_sched, dev.ra0))
        rec.save()
        log(f"{dev.path} over {dev.img} ({plan['sizes']['image_gib']} GiB sparse, dio), ext4 on {dev.mnt}; "
            f"defaults {default}; cgroup v{pods.version}; settings: {' '.join(settings)}")
        apps = Apps(plan, dev, pods, tmp, repo, helper)
        cleanup.push("stop the applications' pods", lambda: [pods.kill(p) for p in list(pods.dirs) if not p.startswith("agent")])
        t = time.monotonic()
        rec.data["setup"] = apps.setup(cleanup)
        log(f"set-up took {time.monotonic() - t:.0f} s: {json.dumps(rec.data['setup'])}")
        agents = {}
        for s in settings:
            if s == "agent" or s.startswith("agent.") or s == "observe":
                agents[s] = Agent(binary, dev, pods, tmp, plan, s)
                cleanup.push(f"stop {s}", agents[s].kill)
        if agents:
            agent = agents.get("agent") or next(iter(agents.values()))
            rec.data["agent_command"] = {
                "argv": ["shadowtune", *agent.argv("STATE", record=True)[1:]],
                "wrapped_in": ("the host's PID namespace (hostPID true: NOT the chart's default)"
                               if plan["agent"].get("host_pid") else
                               "unshare --pid --fork --mount-proc (the pod's own PID namespace: hostPID false)")
                              + f", memory cgroup {plan['agent_memory']} (the chart's limit)",
                "policy": open(agent.policy).read(),
                "state_dir": plan["agent"].get("state_dir", "fresh-per-sequence")}
        poller = DevicePoller(dev)
        poller.start()
        cleanup.push("stop the device poller", poller.stop)
        rec.data["status"] = "running"
        rec.data["declared"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        rec.save()
        run_sequences(plan, settings, default, dev, apps, agents, poller, rec, tmp)
        status = "complete"
    except KeyboardInterrupt as e:
        status, why = "interrupted", f"{e or 'SIGINT'}"
        log(f"interrupted ({why})")
    except (BenchError, planmod.PlanError, OSError, subprocess.SubprocessError) as e:
        status, why = "failed", str(e).splitlines()[0] if str(e) else type(e).__name__
        log(f"error: {why}")
    except Exception as e:  # noqa: BLE001 (a bug: recorded, cleaned up, then shown)
        import traceback
        traceback.print_exc()
        status, why = "failed", f"{type(e).__name__}: {e}".splitlines()[0]
        log(f"error: {why}")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        cleanup.run()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        rec.data["status"] = status
        if why:
            rec.data["stopped_because"] = why
        rec.data["ended"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        rec.save()
        if rec.data["measurements"]:
            md = report.write_run(rec.path)
            log(f"report {os.path.relpath(md, repo)}")
            print(open(md).read())
        else:
            os.remove(rec.path)
            log("nothing was measured: no record kept")
        report.write_index(runs_dir)
    return 0 if status == "complete" else 1


def keep_and_remove(tmp, keep):
    import shutil
    if keep:
        os.makedirs(keep, exist_ok=True)
        for d in os.listdir(tmp):
            if d.startswith("seq-"):
                shutil.copytree(os.path.join(tmp, d), os.path.join(keep, d), dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("agent-state"))
    shutil.rmtree(tmp)


def run_sequences(plan, settings, default, dev, apps, agents, poller, rec, tmp):
    n, reps = len(settings), plan["repetitions"]
    t_start, done = time.monotonic(), 0
    dsched, dra = default.split("/")
    for rep in range(1, reps + 1):
        order = williams_order(n, rep - 1) if plan["order"] == "williams" else list(range(n))
        for pos, k in enumerate(order):
            setting = settings[k]
            seqdir = os.path.join(tmp, f"seq-{rep}-{pos}-{setting.replace('/', '_')}")
            os.makedirs(seqdir)
            ts = time.monotonic()
            seq = {"rep": rep, "position": pos, "setting": setting, "t0": time.time()}
            agent = agents.get(setting)
            if agent:
                dev.set(dsched, dra)
                agent.start(seqdir)
                seq["agent_state_dir"] = plan["agent"].get("state_dir", "fresh-per-sequence")
            else:
                s, ra = setting.split("/")
                dev.set(s, ra)
            apps.start_sequence()
            try:
                for w in plan["workloads"]:
                    apps.prepare(w)
                    drop_caches()
                    cf0 = agent.after_window() if setting == "observe" else None
                    s0, st0 = dev.state(), dev.stat()
                    c0 = agent.cpu_s() if agent else 0
                    t0 = time.time()
                    wall, met = apps.run(w, os.path.join(seqdir, w))
                    t1 = time.time()
                    s1, st1 = dev.state(), dev.stat()
                    m = {"rep": rep, "position": pos, "setting": setting, "workload": w,
                         "t0": round(t0, 3), "wall_s": round(wall, 3), "metrics": met,
                         "state0": f"{s0[0]}/{s0[1]}", "state1": f"{s1[0]}/{s1[1]}",
                         "dev_read_mib": round((st1[1] - st0[1]) / 2048, 1), "dev_reads": st1[0] - st0[0],
                         "dev_write_mib": round((st1[3] - st0[3]) / 2048, 1)}
                    if agent:
                        m["agent_cpu_s"] = round(agent.cpu_s() - c0, 3)
                        m["device_changes"] = [[round(t - t0, 2), st] for t, st in poller.since(t0, t1)]
                    elif s1 != s0 or f"{s1[0]}/{s1[1]}" != setting:
                        raise BenchError(f"{dev.name} changed under the static setting {setting} during {w}: "
                                         f"now {s1[0]}/{s1[1]}: another writer?")
                    if cf0 is not None:
                        m["counterfactual"] = counterfactual.delta(cf0, agent.after_window(), dev.name)
                    rec.data["measurements"].append(m)
                    rec.save()
                    print(f"   rep {rep} {setting:<18} {w:<14} {wall:8.2f} s  {fmt_metrics(met)}", flush=True)
            finally:
                apps.end_sequence(last=(rep == reps and pos == n - 1))
                if agent and agent.proc is not None:
                    summ = agent.stop()
                    time.sleep(3 * poller.period)  # the poller sees the restore
                    summ["device_changes"] = [[round(t - seq["t0"], 2), st] for t, st in poller.since(seq["t0"])]
                    after = dev.state()
                    summ["restored"] = f"{after[0]}/{after[1]}" == default
                    if not summ["restored"]:
                        log(f"warning: after the agent {dev.name} is {after[0]}/{after[1]}, not {default}")
                    seq["agent"] = summ
                seq["seconds"] = round(time.monotonic() - ts, 1)
                rec.data["sequences"].append(seq)
                rec.save()
            done += 1
            el = time.monotonic() - t_start
            left = el / done * (n * reps - done)
            print(f"== rep {rep} {setting}: {time.monotonic() - ts:.1f} s  ({done}/{n * reps} sequences, "
                  f"{el / 60:.1f} min so far, about {left / 60:.1f} min left)", flush=True)


def fmt_metrics(met):
    keys = [k for k in ("ops_s", "tps", "lat_p99_ms", "scan_s", "backup_mib_s", "files_s", "mmap_s", "iops") if k in met]
    return "  ".join(f"{k} {met[k]:g}" for k in keys)
