"""The plan of a decision-benchmark run: what it runs, declared before it runs.

A plan is a JSON file (hack/bench-plans/default.json is the default one,
quick.json the BENCH_QUICK=1 smoke plan). Environment variables override
parts of it; every override is recorded in the plan, and any override of
the agent's own settings (BENCH_AGENT_ARGS, BENCH_POLICY_EXTRA) marks the
run as one that can never be a headline. Errors are one line, naming what
is wrong (PlanError).
"""
import json
import os
import re
import shlex

HERE = os.path.dirname(os.path.abspath(__file__))
PLANS = os.path.join(os.path.dirname(HERE), "bench-plans")
DEFAULT_PLAN = os.path.join(PLANS, "default.json")
QUICK_PLAN = os.path.join(PLANS, "quick.json")

# The real applications (the default suite) and the old synthetic
# workloads, kept as diagnostics (selectable, never in the default plan).
APP_WORKLOADS = ["rocksdb-pread", "rocksdb-mmap", "rocksdb-scan", "rocksdb-rww",
                 "pg-select", "pg-tpcb-scan", "search", "backup-oltp"]
DIAGNOSTIC_WORKLOADS = ["TAC-1", "512k-SR-1", "8k-SR-1", "LKR-1", "IOR-R-1",
                        "TAC-4", "512k-SR-4", "8k-SR-4", "LKR-4", "IOR-R-4",
                        "AIP-1", "AIP-4", "MEM", "MEMMAP", "RR-4k-QD32", "RR-4k-QD1", "RW-70-QD16"]
WORKLOADS = APP_WORKLOADS + DIAGNOSTIC_WORKLOADS

KEYS = {"name", "comment", "quick", "workloads", "settings", "repetitions", "order", "pod_memory",
        "agent_memory", "throttle", "agent", "postgres_restart", "sizes", "overrides"}
THROTTLE_KEYS = {"read_iops", "write_iops", "read_bps", "write_bps"}
AGENT_KEYS = {"args", "policy_extra", "state_dir", "host_pid"}
SIZE_KEYS = {
    "image_gib": int, "rocksdb_keys": int, "rocksdb_value_size": int, "rocksdb_cache_mib": int,
    "rocksdb_pread_reads": int, "rocksdb_mmap_reads": int, "rocksdb_scan_seeks": int,
    "rocksdb_seek_nexts": int, "rocksdb_rww_threads": int, "rocksdb_rww_reads": int,
    "rocksdb_rww_write_bps": int, "pg_scale": int, "pg_shared_buffers": str, "pg_clients": int,
    "pg_select_tx": int, "pg_tpcb_tx": int, "pg_backup_oltp_tx": int, "search_trees": list,
    # diagnostics (the old synthetic workloads)
    "diag_big_mib": int, "diag_tree_files": int, "diag_mm_mib": int, "diag_mem_reads": int,
    "diag_mem_phases": int, "diag_rr_mib": int,
}
DIAG_DEFAULTS = {"diag_big_mib": 128, "diag_tree_files": 2000, "diag_mm_mib": 2048,
                 "diag_mem_reads": 2000, "diag_mem_phases": 3, "diag_rr_mib": 128}
SEARCH_TREES = {"goroot", "goroot/src", "repo"}
SETTING_RE = re.compile(r"^(default|agent|observe|agent\.[a-z0-9][a-z0-9-]{0,20}|(default-scheduler|[a-z][a-z0-9-]*)/(default|[1-9][0-9]{0,5}))$")
MEM_RE = re.compile(r"^[1-9][0-9]*[KMG]$")


class PlanError(Exception):
    """A plan or override that cannot be run; str() is one line."""


def load(path):
    try:
        with open(path) as f:
            plan = json.load(f)
    except OSError as e:
        raise PlanError(f"plan {path}: {e.strerror}")
    except json.JSONDecodeError as e:
        raise PlanError(f"plan {path}: not JSON: {e.msg} at line {e.lineno} column {e.colno}")
    if not isinstance(plan, dict):
        raise PlanError(f"plan {path}: want a JSON object, got {type(plan).__name__}")
    plan.setdefault("overrides", {})
    plan["source"] = os.path.relpath(path, os.path.dirname(os.path.dirname(HERE)))
    return plan


def from_env(env):
    """The plan the environment asks for: BENCH_PLAN, or the quick plan with
    BENCH_QUICK=1, or the default plan; then the overrides. Validated."""
    quick = env.get("BENCH_QUICK", "0")
    if quick not in ("0", "1", ""):
        raise PlanError(f"BENCH_QUICK: want 0 or 1, got {quick!r}")
    path = env.get("BENCH_PLAN") or (QUICK_PLAN if quick == "1" else DEFAULT_PLAN)
    plan = load(path)
    apply_overrides(plan, env)
    validate(plan)
    return plan


def apply_overrides(plan, env):
    ov = plan.setdefault("overrides", {})

    def note(var, val):
        ov[var] = val

    if env.get("BENCH_NAME"):
        plan["name"] = env["BENCH_NAME"]
        note("BENCH_NAME", env["BENCH_NAME"])
    if env.get("BENCH_REPS"):
        v = env["BENCH_REPS"]
        if not re.fullmatch(r"[1-9][0-9]{0,2}", v):
            raise PlanError(f"BENCH_REPS: want a whole number from 1, got {v!r}")
        plan["repetitions"] = int(v)
        note("BENCH_REPS", v)
    if env.get("BENCH_WORKLOADS"):
        plan["workloads"] = env["BENCH_WORKLOADS"].split()
        note("BENCH_WORKLOADS", env["BENCH_WORKLOADS"])
    if env.get("BENCH_SETTINGS"):
        plan["settings"] = env["BENCH_SETTINGS"].split()
        note("BENCH_SETTINGS", env["BENCH_SETTINGS"])
    if env.get("BENCH_MEM"):
        plan["pod_memory"] = env["BENCH_MEM"]
        note("BENCH_MEM", env["BENCH_MEM"])
    if env.get("BENCH_AGENT_STATE"):
        plan.setdefault("agent", {})["state_dir"] = env["BENCH_AGENT_STATE"]
        note("BENCH_AGENT_STATE", env["BENCH_AGENT_STATE"])
    if env.get("BENCH_THROTTLE"):
        v = env["BENCH_THROTTLE"]
        note("BENCH_THROTTLE", v)
        if v == "off":
            plan["throttle"] = {k: 0 for k in THROTTLE_KEYS}
        else:
            t = dict(plan.get("throttle") or {})
            for part in v.split(","):
                k, _, n = part.partition("=")
                if k not in THROTTLE_KEYS or not re.fullmatch(r"[0-9]+", n):
                    raise PlanError(f"BENCH_THROTTLE: want off or KEY=N,... with KEY in "
                                    f"{', '.join(sorted(THROTTLE_KEYS))}, got {part!r}")
                t[k] = int(n)
            plan["throttle"] = t
    if env.get("BENCH_AGENT_HOSTPID"):
        v = env["BENCH_AGENT_HOSTPID"]
        if v not in ("0", "1"):
            raise PlanError(f"BENCH_AGENT_HOSTPID: want 0 or 1, got {v!r}")
        plan.setdefault("agent", {})["host_pid"] = v == "1"
        note("BENCH_AGENT_HOSTPID", v)
    if env.get("BENCH_AGENT_ARGS"):
        try:
            args = shlex.split(env["BENCH_AGENT_ARGS"])
        except ValueError as e:
            raise PlanError(f"BENCH_AGENT_ARGS: {e}")
        plan.setdefault("agent", {})["args"] = args
        note("BENCH_AGENT_ARGS", env["BENCH_AGENT_ARGS"])
    if env.get("BENCH_POLICY_EXTRA"):
        try:
            extra = json.loads(env["BENCH_POLICY_EXTRA"])
        except json.JSONDecodeError as e:
            raise PlanError(f"BENCH_POLICY_EXTRA: want a JSON object merged into the policy's spec, "
                            f"e.g. '{{\"rollout\": {{\"minDwell\": \"0s\"}}}}': {e.msg}")
        plan.setdefault("agent", {})["policy_extra"] = extra
        note("BENCH_POLICY_EXTRA", env["BENCH_POLICY_EXTRA"])


def validate(plan):
    bad = sorted(set(plan) - KEYS - {"source"})
    if bad:
        raise PlanError(f"plan: unknown key {bad[0]!r} (known: {', '.join(sorted(KEYS))})")
    name = plan.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,40}", name):
        raise PlanError(f"plan: name: want lower-case letters, digits and '-', got {name!r}")
    ws = plan.get("workloads")
    if not isinstance(ws, list) or not ws or not all(isinstance(w, str) for w in ws):
        raise PlanError("plan: workloads: want a non-empty list of names")
    for w in ws:
        if w not in WORKLOADS:
            raise PlanError(f"plan: unknown workload {w!r} (applications: {' '.join(APP_WORKLOADS)}; "
                            f"diagnostics: {' '.join(DIAGNOSTIC_WORKLOADS)})")
    if len(set(ws)) != len(ws):
        raise PlanError("plan: workloads: a workload is listed twice")
    st = plan.get("settings")
    if st not in ("auto", "auto-observe"):
        if not isinstance(st, list) or not st:
            raise PlanError("plan: settings: want \"auto\", \"auto-observe\" or a non-empty list such as "
                            "[\"none/2560\", \"agent\"]")
        for s in st:
            if not isinstance(s, str) or not SETTING_RE.match(s):
                raise PlanError(f"plan: unknown setting {s!r} (want SCHEDULER/READ_AHEAD_KB, "
                                "SCHEDULER/default, default-scheduler/KB, default, agent, agent.VARIANT or observe)")
    reps = plan.get("repetitions")
    if not isinstance(reps, int) or isinstance(reps, bool) or reps < 1:
        raise PlanError(f"plan: repetitions: want a whole number from 1, got {reps!r}")
    if plan.get("order") not in ("williams", "fixed"):
        raise PlanError(f"plan: order: want williams or fixed, got {plan.get('order')!r}")
    for k in ("pod_memory", "agent_memory"):
        v = plan.get(k)
        if not isinstance(v, str) or not MEM_RE.match(v):
            raise PlanError(f"plan: {k}: want a size such as 384M, got {v!r}")
        if mem_bytes(v) < 32 << 20:
            raise PlanError(f"plan: {k}: {v} is below 32M")
    t = plan.get("throttle")
    if not isinstance(t, dict) or set(t) != THROTTLE_KEYS or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in t.values()):
        raise PlanError(f"plan: throttle: want an object with whole numbers (0: no cap) for "
                        f"{', '.join(sorted(THROTTLE_KEYS))}")
    a = plan.get("agent")
    if not isinstance(a, dict) or set(a) - AGENT_KEYS:
        raise PlanError(f"plan: agent: want an object with {', '.join(sorted(AGENT_KEYS))}")
    if not isinstance(a.get("args", []), list) or not all(isinstance(x, str) for x in a.get("args", [])):
        raise PlanError("plan: agent.args: want a list of strings")
    if not isinstance(a.get("policy_extra", {}), dict):
        raise PlanError("plan: agent.policy_extra: want an object (merged into the policy's spec)")
    if "mode" in a.get("policy_extra", {}) or "devices" in a.get("policy_extra", {}):
        raise PlanError("plan: agent.policy_extra: spec.mode and spec.devices are the benchmark's own")
    if not isinstance(a.get("host_pid", False), bool):
        raise PlanError("plan: agent.host_pid: want true or false")
    if a.get("state_dir", "fresh-per-sequence") not in ("fresh-per-sequence", "kept"):
        raise PlanError(f"plan: agent.state_dir: want fresh-per-sequence or kept, got {a.get('state_dir')!r}")
    if plan.get("postgres_restart") not in ("per-sequence", "per-run"):
        raise PlanError(f"plan: postgres_restart: want per-sequence or per-run, got {plan.get('postgres_restart')!r}")
    sz = plan.get("sizes")
    if not isinstance(sz, dict):
        raise PlanError("plan: sizes: want an object")
    for k, v in sz.items():
        if k not in SIZE_KEYS:
            raise PlanError(f"plan: sizes: unknown key {k!r}")
        want = SIZE_KEYS[k]
        if not isinstance(v, want) or isinstance(v, bool) or (want is int and v < 1):
            raise PlanError(f"plan: sizes.{k}: want a {'whole number from 1' if want is int else want.__name__}, got {v!r}")
    for k in SIZE_KEYS:
        if k not in sz and not k.startswith("diag_"):
            raise PlanError(f"plan: sizes.{k} is missing")
    for tree in sz["search_trees"]:
        if tree not in SEARCH_TREES:
            raise PlanError(f"plan: sizes.search_trees: unknown tree {tree!r} (known: {', '.join(sorted(SEARCH_TREES))})")
    if not re.fullmatch(r"[1-9][0-9]*(kB|MB|GB)", sz["pg_shared_buffers"]):
        raise PlanError(f"plan: sizes.pg_shared_buffers: want e.g. 32MB, got {sz['pg_shared_buffers']!r}")
    for k, v in DIAG_DEFAULTS.items():
        sz.setdefault(k, v)
    return plan


def mem_bytes(s):
    return int(s[:-1]) << {"K": 10, "M": 20, "G": 30}[s[-1]]


def resolve_settings(plan, offered, default_sched, ra0):
    """The plan's settings as SCHEDULER/KB strings (and agent), in the
    plan's order; "auto": every scheduler offered × {ra0, 128}, the
    defaults first, then agent; "auto-observe": every scheduler offered at
    ra0, the defaults first, then observe (the counterfactual's: the
    agent's scheduler predictions against each scheduler measured)."""
    st = plan["settings"]
    if st in ("auto", "auto-observe"):
        scheds = [default_sched] + [s for s in offered if s != default_sched]
        ras = dict.fromkeys([ra0, 128]) if st == "auto" else [ra0]
        out = [f"{s}/{ra}" for s in scheds for ra in ras]
        return out + (["agent"] if st == "auto" else ["observe"])
    out = []
    for s in st:
        if s == "agent" or s.startswith("agent.") or s == "observe":
            r = s
        elif s == "default":
            r = f"{default_sched}/{ra0}"
        else:
            sched, ra = s.split("/")
            if sched == "default-scheduler":
                sched = default_sched
            if sched not in offered:
                raise PlanError(f"setting {s}: scheduler {sched} is not offered by this kernel "
                                f"(offered: {' '.join(offered)})")
            r = f"{sched}/{ra0 if ra == 'default' else int(ra)}"
        if r in out:
            raise PlanError(f"setting {s}: listed twice (as {r})")
        out.append(r)
    return out


def agent_deviations(plan):
    """The agent settings this plan changes from the shipped defaults, as
    strings naming each one; empty for a run as shipped."""
    a = plan.get("agent", {})
    dev = []
    if a.get("args"):
        dev.append("agent flags: " + " ".join(a["args"]))
    if a.get("policy_extra"):
        dev.append("policy spec: " + json.dumps(a["policy_extra"], sort_keys=True))
    if a.get("host_pid"):
        dev.append("hostPID: the agent in the host's PID namespace")
    st = plan.get("settings")
    variants = [s for s in st if s.startswith("agent.")] if isinstance(st, list) else []
    if variants:
        dev.append("agent variants (other binaries): " + " ".join(variants))
    return dev


def headline_blockers(plan, settings, offered, default_sched, ra0):
    """Why a run of this plan (complete) could not be a headline figure;
    empty when it could: the default plan's workloads, sizes, memory and
    throttle, every static setting, at least 3 repetitions, the agent as
    shipped."""
    why = []
    if plan.get("quick"):
        why.append("a BENCH_QUICK smoke run")
    why += agent_deviations(plan)
    ref = load(DEFAULT_PLAN)
    validate(ref)
    if plan["workloads"] != ref["workloads"]:
        why.append("not the default workloads")
    if plan["sizes"] != ref["sizes"]:
        why.append("not the default sizes")
    for k in ("pod_memory", "agent_memory", "throttle", "postgres_restart"):
        if plan[k] != ref[k]:
            why.append(f"{k} is not the default's")
    if plan["agent"].get("state_dir", "fresh-per-sequence") != ref["agent"]["state_dir"]:
        why.append("agent state directory kept across sequences")
    full = resolve_settings(dict(ref, settings="auto"), offered, default_sched, ra0)
    if sorted(settings) != sorted(full):
        why.append("not every static setting against the agent")
    if plan["repetitions"] < 3:
        why.append(f"{plan['repetitions']} repetition(s), fewer than 3")
    if plan["order"] != "williams":
        why.append("not in the Williams order")
    return why
