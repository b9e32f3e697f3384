"""Figures of the decision benchmark, generated from the runs' records.

write_run(JSON) writes DATE-NAME.md beside a run's record: the plan, every
workload × setting median of wall time and of the application's metrics
with 95 % intervals (bootstrap over repetitions, seeded), the agent
against the best static setting and the defaults, the three bars of
issue 43 judged, and what the agent did. write_index(DIR) writes
DIR/README.md, the list of every run. readme_block(DIR) is the README's
results table, from the latest full run only. Everything is a pure
function of the records: the same records give the same bytes, which
hack/benchreport's Go test checks.
"""
import glob
import json
import os
import random
import statistics as st

from . import counterfactual

SEED = 43
BOOT = 2000
BEGIN = "<!-- bench-decisions:begin -->"
END = "<!-- bench-decisions:end -->"
# issue 43's bars
BAR_TOTAL = 1.02
BAR_SLOWER = 1.05
BAR_PATHOLOGY = 2.0
BAR_PATHOLOGY_AGENT = 1.25

# The application metric each workload is summarised by (name, unit,
# higher is better), then its other metrics.
PRIMARY = {
    "rocksdb-pread": ("ops_s", "ops/s", True), "rocksdb-mmap": ("ops_s", "ops/s", True),
    "rocksdb-scan": ("ops_s", "seeks/s", True), "rocksdb-rww": ("ops_s", "ops/s", True),
    "pg-select": ("tps", "TPS", True), "pg-tpcb-scan": ("tps", "TPS", True),
    "search": ("files_s", "files/s", True), "backup-oltp": ("tps", "TPS", True),
    "MEM": ("mmap_s", "s", False), "MEMMAP": ("mmap_s", "s", False), "RR-4k-QD32": ("iops", "IOPS", True),
    "RR-4k-QD1": ("iops", "IOPS", True), "RW-70-QD16": ("iops", "IOPS", True),
}
METRIC_NAMES = {
    "ops_s": "ops/s", "p50_us": "p50 µs", "p99_us": "p99 µs", "p999_us": "p99.9 µs", "tps": "TPS",
    "lat_avg_ms": "latency avg ms", "lat_p50_ms": "latency p50 ms", "lat_p95_ms": "latency p95 ms",
    "lat_p99_ms": "latency p99 ms", "scan_s": "reporting scan s", "backup_s": "backup s",
    "backup_mib_s": "backup MiB/s", "files_s": "files/s", "mib_s": "MiB/s", "matches": "matches",
    "mmap_s": "mmap phases s", "iops": "IOPS",
}


# --- kinds of run -----------------------------------------------------------------

def kind(rec):
    """full (may be a headline), smoke, non-default agent, custom or cut short."""
    if rec.get("status") != "complete":
        return "cut short"
    if rec["plan"].get("quick"):
        return "smoke"
    if rec.get("agent_deviations"):
        return "non-default agent"
    if rec.get("headline_blockers") or rec.get("git", {}).get("dirty"):
        return "custom"
    return "full"


def kind_note(rec):
    note = kind_banner(rec)
    if rec.get("agent_deviations") and kind(rec) != "non-default agent":
        note += " **Non-default agent settings: " + "; ".join(rec["agent_deviations"]) + ".**"
    return note


def kind_banner(rec):
    k = kind(rec)
    why = "; ".join(rec.get("headline_blockers") or [])
    if k == "cut short":
        return (f"**Cut short** ({rec.get('status')}: {rec.get('stopped_because', 'no reason recorded')}): "
                "only its complete repetitions are summarised, and it is never a headline figure.")
    if k == "smoke":
        return ("**SMOKE run (`BENCH_QUICK=1`): a test of the benchmark and of this generator, not a result.** "
                "Reduced sizes, one repetition; it is never a headline figure.")
    if k == "non-default agent":
        return ("**Non-default agent settings: " + "; ".join(rec["agent_deviations"]) +
                ".** Not the agent as shipped: never a headline figure.")
    if k == "custom":
        if rec.get("git", {}).get("dirty"):
            why = (why + "; " if why else "") + "run from a work tree with uncommitted changes"
        return f"**Not the default plan** ({why}): never a headline figure."
    return "A full run of the default plan, the agent as shipped: it may be the README's headline."


# --- statistics ---------------------------------------------------------------------

def pct(sorted_vals, q):
    return sorted_vals[min(len(sorted_vals) - 1, int(q * len(sorted_vals)))]


class Stats:
    def __init__(self, rec):
        self.rec = rec
        self.settings = rec.get("settings") or sorted({m["setting"] for m in rec["measurements"]})
        self.default = rec.get("default_setting")
        self.workloads = rec["plan"]["workloads"]
        self.t, self.met = {}, {}
        for m in rec["measurements"]:
            self.t.setdefault((m["setting"], m["workload"]), {})[m["rep"]] = m["wall_s"]
            for k, v in m.get("metrics", {}).items():
                if isinstance(v, (int, float)):
                    self.met.setdefault((m["setting"], m["workload"], k), {})[m["rep"]] = v
        reps = sorted({m["rep"] for m in rec["measurements"]})
        self.complete = [r for r in reps if all(r in self.t.get((s, w), {})
                                                for s in self.settings for w in self.workloads)]
        self.statics = [s for s in self.settings if "/" in s]  # not the agent, its variants, observe
        self.has_agent = "agent" in self.settings

    def med(self, s, w, reps=None):
        reps = reps or self.complete
        return st.median(self.t[(s, w)][r] for r in reps)

    def total(self, s, reps=None):
        reps = reps or self.complete
        return st.median(sum(self.t[(s, w)][r] for w in self.workloads) for r in reps)

    def boot(self, fn):
        """95 % interval of fn(reps) over BOOT resamples of the complete
        repetitions (seeded)."""
        rng = random.Random(SEED)
        vals = sorted(fn(rng.choices(self.complete, k=len(self.complete))) for _ in range(BOOT))
        return pct(vals, 0.025), pct(vals, 0.975)

    def best_static_total(self, reps=None):
        return min(self.statics, key=lambda s: (self.total(s, reps), self.statics.index(s)))

    def best_static(self, w, reps=None):
        return min(self.statics, key=lambda s: (self.med(s, w, reps), self.statics.index(s)))

    def bars(self):
        """issue 43's three bars, judged on the medians; None when the
        agent or the defaults were not run, or no repetition is complete."""
        if not (self.complete and self.has_agent and self.default in self.statics):
            return None
        out = []
        best = self.best_static_total()
        a, b = self.total("agent"), self.total(best)
        lo, hi = self.boot(lambda rs: self.total("agent", rs) / self.total(self.best_static_total(rs), rs))
        out.append({"bar": f"total ≤ {BAR_TOTAL} × the best static setting's total",
                    "value": f"{a / b:.3f} ({lo:.3f}–{hi:.3f}): agent {a:.2f} s, {best} {b:.2f} s",
                    "pass": a <= BAR_TOTAL * b})
        worst, slower = None, []
        for w in self.workloads:
            r = self.med("agent", w) / self.med(self.default, w)
            if worst is None or r > worst[1]:
                worst = (w, r)
            if r > BAR_SLOWER:
                slower.append(f"{w} {r:.3f}")
        out.append({"bar": f"no workload more than {round((BAR_SLOWER - 1) * 100)} % slower than the defaults ({self.default})",
                    "value": ("slower: " + ", ".join(slower)) if slower else f"worst {worst[0]} {worst[1]:.3f}",
                    "pass": not slower})
        path, fails = [], []
        for w in self.workloads:
            bs = self.best_static(w)
            d, b = self.med(self.default, w), self.med(bs, w)
            if d >= BAR_PATHOLOGY * b:
                r = self.med("agent", w) / b
                path.append(f"{w} {r:.3f} (defaults {d / b:.2f}× {bs})")
                if r > BAR_PATHOLOGY_AGENT:
                    fails.append(w)
        out.append({"bar": f"where the defaults take ≥ {BAR_PATHOLOGY:g}× the best static setting, "
                           f"the agent ≤ {BAR_PATHOLOGY_AGENT} × it",
                    "value": ", ".join(path) if path else "no workload where the defaults take 2× the best static",
                    "pass": not fails})
        return out


def policy_spec(policy):
    """The spec of the policy given to the agent, on one line."""
    spec = policy.split("spec:", 1)[-1]
    return "; ".join(line.strip() for line in spec.strip().splitlines() if line.strip())


def f2(x):
    return f"{x:.2f}"


def fmetric(v):
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def setting_label(s, default):
    return f"{s} (defaults)" if s == default else s


# --- one run's report ------------------------------------------------------------------

def render_run(rec, json_name):
    S = Stats(rec)
    p = rec["plan"]
    L = []
    L.append(f"# Decision benchmark run `{rec['name']}`")
    L.append("")
    L.append(kind_note(rec))
    L.append("")
    L.append(f"Generated from [`{json_name}`]({json_name}) (every repetition's every measurement) by "
             f"`python3 hack/bench_decisions.py report docs/runs/{json_name}`; do not edit.")
    L.append("")
    L.append("## Plan, declared before the first workload")
    L.append("")
    L.append("| | |")
    L.append("|---|---|")
    ov = p.get("overrides") or {}
    L.append(f"| plan | `{p.get('source', '?')}` ({p['name']})" + (
        "; overrides: " + ", ".join(f"`{k}={v}`" for k, v in sorted(ov.items())) if ov else "") + " |")
    L.append(f"| workloads, in sequence order | {', '.join(p['workloads'])} |")
    L.append(f"| settings | {', '.join(setting_label(s, S.default) for s in S.settings)} |")
    L.append(f"| repetitions | {p['repetitions']}, each running every setting's sequence, the settings in "
             f"{'the order of a Williams design row' if p['order'] == 'williams' else 'a fixed order'} |")
    cg = rec.get("cgroups", {})
    L.append(f"| pods | memory {p['pod_memory']} each (cgroup v{cg.get('version', '?')}); "
             f"the agent's {p['agent_memory']} |")
    t = p["throttle"]
    L.append(f"| device cap (blk-throttle) | reads {t['read_iops']} IOPS, {t['read_bps'] / 1e6:g} MB/s; "
             f"writes {t['write_iops']} IOPS, {t['write_bps'] / 1e6:g} MB/s (0: none) |")
    dv = rec.get("device", {})
    if dv:
        L.append(f"| device | loop device over a {dv.get('image_gib')} GiB sparse file, direct I/O, "
                 f"{dv.get('fs')}; schedulers offered: {' '.join(dv.get('offered_schedulers', []))}; "
                 f"read_ahead_kb default {dv.get('default_read_ahead_kb')} |")
    ac = rec.get("agent_command")
    if ac:
        L.append(f"| agent | `{' '.join(ac['argv'])}`, {ac['wrapped_in']}; state directory "
                 f"{ac['state_dir']}; policy spec: `{policy_spec(ac['policy'])}` |")
    L.append(f"| agent settings changed from the shipped defaults | "
             f"{'; '.join(rec.get('agent_deviations') or []) or 'none'} |")
    L.append(f"| PostgreSQL | restarted {p['postgres_restart'].replace('-', ' ')} |")
    L.append("| sizes | " + ", ".join(f"{k} {v}" for k, v in sorted(p["sizes"].items())
                                      if not k.startswith("diag_")) + " |")
    if rec.get("installed"):
        L.append(f"| packages installed by the run | {' '.join(rec['installed'])} |")
    if rec.get("setup"):
        L.append("| set-up (measured) | " + ", ".join(f"{k} {v}" for k, v in sorted(rec["setup"].items())) + " |")
    g, h = rec.get("git", {}), rec.get("host", {})
    L.append(f"| commit | `{g.get('commit', '?')[:12]}` ({g.get('branch', '?')}"
             f"{', uncommitted changes' if g.get('dirty') else ''}); agent binary {rec.get('agent_binary', {}).get('version', '?')} |")
    L.append(f"| host | kernel {h.get('kernel')}, {h.get('cpus')} CPUs, {h.get('memory_gib')} GiB, {h.get('os')}; "
             f"load at start {h.get('load_avg_at_start')}; loop devices at start {h.get('other_loop_devices')} |")
    L.append(f"| started, declared, ended (UTC) | {rec.get('started')}, {rec.get('declared', '-')}, {rec.get('ended', '-')} |")
    L.append(f"| status | {rec.get('status')}" + (f": {rec['stopped_because']}" if rec.get("stopped_because") else "") + " |")
    L.append("")
    rest = [m for m in rec["measurements"] if m["rep"] not in S.complete]
    if rest:
        L.append("## Measured in incomplete repetitions (not summarised)")
        L.append("")
        L.append("| repetition | setting | workload | wall s |")
        L.append("|---:|---|---|---:|")
        for m in rest:
            L.append(f"| {m['rep']} | {m['setting']} | {m['workload']} | {f2(m['wall_s'])} |")
        L.append("")
    if not S.complete:
        L.append("No repetition is complete: nothing is summarised.")
        L.append("")
        return "\n".join(L)
    n = len(S.complete)
    L.append(f"## Wall time, median seconds over {n} repetition(s) (95 % interval)")
    L.append("")
    L.append("Each workload is a fixed amount of work, its processes started afresh, the page cache dropped "
             "before it. Interval: bootstrap over the repetitions "
             f"({BOOT} resamples, seed {SEED}); with one repetition it is the value itself.")
    L.append("")
    L.append("| workload | " + " | ".join(setting_label(s, S.default) for s in S.settings) + " |")
    L.append("|---|" + "---:|" * len(S.settings))
    for w in S.workloads:
        cells = []
        for s in S.settings:
            lo, hi = S.boot(lambda rs, s=s, w=w: S.med(s, w, rs))
            cells.append(f"{f2(S.med(s, w))} ({f2(lo)}–{f2(hi)})")
        L.append(f"| {w} | " + " | ".join(cells) + " |")
    cells = []
    for s in S.settings:
        lo, hi = S.boot(lambda rs, s=s: S.total(s, rs))
        cells.append(f"**{f2(S.total(s))}** ({f2(lo)}–{f2(hi)})")
    L.append("| **total** | " + " | ".join(cells) + " |")
    L.append("")
    L.append(f"## Application metrics, medians over {n} repetition(s)")
    L.append("")
    L.append("| workload | metric | " + " | ".join(S.settings) + " |")
    L.append("|---|---|" + "---:|" * len(S.settings))
    for w in S.workloads:
        keys = []
        for (s, ww, k) in S.met:
            if ww == w and k not in keys:
                keys.append(k)
        prim = PRIMARY.get(w, (None,))[0]
        keys.sort(key=lambda k: (k != prim, list(METRIC_NAMES).index(k) if k in METRIC_NAMES else 99, k))
        for k in keys:
            cells = []
            for s in S.settings:
                d = S.met.get((s, w, k), {})
                vals = [d[r] for r in S.complete if r in d]
                cells.append(fmetric(st.median(vals)) if vals else "-")
            L.append(f"| {w} | {METRIC_NAMES.get(k, k)} | " + " | ".join(cells) + " |")
    L.append("")
    if S.has_agent and S.statics:
        L.append("## The agent against the static settings")
        L.append("")
        best = S.best_static_total()
        a = S.total("agent")
        lo, hi = S.boot(lambda rs: S.total("agent", rs) / S.total(S.best_static_total(rs), rs))
        L.append(f"- Total: agent {f2(a)} s; best static setting by total `{best}` {f2(S.total(best))} s: "
                 f"**{a / S.total(best):.3f}** ({lo:.3f}–{hi:.3f}).")
        if S.default in S.statics:
            lo, hi = S.boot(lambda rs: S.total("agent", rs) / S.total(S.default, rs))
            L.append(f"- Against the defaults `{S.default}` ({f2(S.total(S.default))} s): "
                     f"**{a / S.total(S.default):.3f}** ({lo:.3f}–{hi:.3f}).")
        L.append("")
        L.append("| workload | best static | agent / best static | agent / defaults | app metric, agent / best static |")
        L.append("|---|---|---:|---:|---:|")
        for w in S.workloads:
            bs = S.best_static(w)
            lo, hi = S.boot(lambda rs, w=w: S.med("agent", w, rs) / S.med(S.best_static(w, rs), w, rs))
            r1 = f"{S.med('agent', w) / S.med(bs, w):.3f} ({lo:.3f}–{hi:.3f})"
            if S.default in S.statics:
                lo, hi = S.boot(lambda rs, w=w: S.med("agent", w, rs) / S.med(S.default, w, rs))
                r2 = f"{S.med('agent', w) / S.med(S.default, w):.3f} ({lo:.3f}–{hi:.3f})"
            else:
                r2 = "-"
            prim = PRIMARY.get(w, (None,))[0]
            ma, mb = S.met.get(("agent", w, prim), {}), S.met.get((bs, w, prim), {})
            va = [ma[r] for r in S.complete if r in ma]
            vb = [mb[r] for r in S.complete if r in mb]
            r3 = f"{st.median(va) / st.median(vb):.3f} ({METRIC_NAMES.get(prim, prim)})" if va and vb and st.median(vb) else "-"
            L.append(f"| {w} | {bs} | {r1} | {r2} | {r3} |")
        L.append("")
    L += time_section(rec, S)
    bars = S.bars()
    L.append("## Issue 43's bars")
    L.append("")
    if bars is None:
        L.append("Not judged: the run has no agent or no defaults, or no complete repetition.")
    else:
        if kind(rec) != "full":
            L.append(f"Judged for the record; this run is {kind(rec)}, so these are not results.")
            L.append("")
        L.append("| bar | measured (medians) | |")
        L.append("|---|---|---|")
        for b in bars:
            L.append(f"| {b['bar']} | {b['value']} | **{'PASS' if b['pass'] else 'FAIL'}** |")
    L.append("")
    seqs = [q for q in rec.get("sequences", []) if q.get("agent")]
    if seqs:
        L.append("## What the agent did")
        L.append("")
        L.append("Per sequence: the device's scheduler/read_ahead_kb as polled every 100 ms (seconds from the "
                 "sequence's start), and the changes its log names. Its state directory: "
                 f"{seqs[0].get('agent_state_dir', '?')}.")
        L.append("")
        for q in seqs:
            a = q["agent"]
            ch = ", ".join(f"{t:g} s {s}" for t, s in a.get("device_changes", [])) or "none"
            L.append(f"- rep {q['rep']} {q['setting']} (position {q['position']}, {q.get('seconds', '?')} s): "
                     f"{a.get('windows') if a.get('windows') is not None else '-'} windows; exit {a.get('exit')}; "
                     "device restored at exit: "
                     f"{'yes' if a.get('restored') else 'NO'}; device states: {ch}")
            for e in a.get("log_events", []):
                if e.get("change"):
                    L.append(f"  - {e.get('msg', '')}: {e['change']}")
        L.append("")
        per_w = {}
        for m in rec["measurements"]:
            if m["setting"] == "agent":
                per_w.setdefault(m["workload"], []).append(m)
        L.append("| workload | device at start → end, per repetition | agent CPU s (median) |")
        L.append("|---|---|---:|")
        for w in S.workloads:
            ms = per_w.get(w, [])
            cpu = [m.get("agent_cpu_s", 0) for m in ms]
            L.append(f"| {w} | " + "; ".join(f"{m['state0']} → {m['state1']}" + changes(m) for m in ms) +
                     f" | {st.median(cpu):.2f} |" if ms else f"| {w} | - | - |")
        L.append("")
    L += counterfactual.section(rec, svg_name(json_name))
    return "\n".join(L)


def svg_name(json_name):
    return json_name[:-5] + "-counterfactual.svg"


def time_section(rec, S):
    """The run's time: each setting's sequence, and what the plan would
    take at 3 repetitions (the default), from the medians of its sequences."""
    seqs = rec.get("sequences", [])
    if not seqs:
        return []
    per = {}
    for q in seqs:
        if "seconds" in q:
            per.setdefault(q["setting"], []).append(q["seconds"])
    setup = (rec.get("setup") or {}).get("setup_s", 0)
    L = ["## Time", "",
         "Seconds per sequence of workloads (median over the repetitions; workloads, cache drops, "
         "restores, PostgreSQL's restart, the agent's start and stop): " +
         ", ".join(f"{s} {st.median(per[s]):.0f}" for s in S.settings if s in per) + f"; set-up {setup:.0f} s."]
    if all(s in per for s in S.settings):
        one = sum(st.median(per[s]) for s in S.settings)
        L.append(f"At 3 repetitions these settings take about {(setup + 3 * one) / 60:.1f} min "
                 f"({setup:.0f} s set-up + 3 × {one:.0f} s).")
    L.append("")
    return L


def changes(m):
    """The device's states polled during one measurement, after its first."""
    ch = [c for c in m.get("device_changes", []) if c[0] > 0]
    return (" (" + ", ".join(f"at {t:g} s {s}" for t, s in ch) + ")") if ch else ""


def write_run(json_path):
    with open(json_path) as f:
        rec = json.load(f)
    md = json_path[:-5] + ".md"
    with open(md, "w") as f:
        f.write(render_run(rec, os.path.basename(json_path)) + "\n")
    plot = counterfactual.svg(rec)
    if plot:
        with open(os.path.join(os.path.dirname(json_path), svg_name(os.path.basename(json_path))), "w") as f:
            f.write(plot)
    return md


# --- the index and the README block ---------------------------------------------------

def load_runs(runs_dir):
    out = []
    for p in sorted(glob.glob(os.path.join(runs_dir, "*.json"))):
        try:
            with open(p) as f:
                rec = json.load(f)
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(rec, dict) and rec.get("format") and "plan" in rec:
            out.append((p, rec))
    out.sort(key=lambda x: (x[1].get("started", ""), x[0]))
    return out


def bars_summary(rec):
    S = Stats(rec)
    b = S.bars() if S.complete else None
    if not b:
        return "not judged"
    return " ".join("PASS" if x["pass"] else "FAIL" for x in b)


def render_index(runs_dir):
    runs = load_runs(runs_dir)
    L = ["# Decision benchmark runs", "",
         "Every run of `make bench-decisions` made for issue 43 and after, newest first. Generated by "
         "`python3 hack/bench_decisions.py index` from the runs' records (`*.json`); do not edit. A run's "
         "kind says whether it may be a headline: only a **full** run (the default plan, complete, the agent "
         "as shipped, every static setting, ≥ 3 repetitions) can be; the README's table comes from the "
         "latest full run. Bars: issue 43's three (total; no workload > 5 % slower than the defaults; the "
         "read-ahead pathologies), PASS or FAIL each.", "",
         "| run | kind | status | workloads × settings × repetitions | commit | bars | report |",
         "|---|---|---|---|---|---|---|"]
    for p, rec in reversed(runs):
        name = os.path.basename(p)[:-5]
        S = Stats(rec)
        L.append(f"| {name} | {kind(rec)} | {rec.get('status')} | {len(rec['plan']['workloads'])} × "
                 f"{len(S.settings)} × {len(S.complete)}/{rec['plan']['repetitions']} | "
                 f"`{rec.get('git', {}).get('commit', '?')[:9]}` | {bars_summary(rec)} | "
                 f"[{name}.md]({name}.md) |")
    if not runs:
        L.append("| (none yet) | | | | | | |")
    arch = sorted(f for f in os.listdir(runs_dir) if f.endswith(".md") and f != "README.md"
                  and not os.path.exists(os.path.join(runs_dir, f[:-3] + ".json")))
    if arch:
        L += ["", "## Other dated runs", "",
              "Runs that are not of this benchmark (VM lab tests, calibrations), and the benchmark's results "
              "from before issue 43, when it ran synthetic workloads with the agent at `minDwell: 0s`; kept "
              "unchanged:", ""]
        L += [f"- [{f}]({f})" for f in arch]
    return "\n".join(L) + "\n"


def write_index(runs_dir):
    p = os.path.join(runs_dir, "README.md")
    with open(p, "w") as f:
        f.write(render_index(runs_dir))
    return p


def latest_full(runs_dir):
    full = [(p, r) for p, r in load_runs(runs_dir) if kind(r) == "full"]
    return full[-1] if full else (None, None)


def readme_block(runs_dir, link_prefix="docs/runs/"):
    p, rec = latest_full(runs_dir)
    L = [BEGIN, "<!-- generated by `python3 hack/bench_decisions.py readme` from the latest full run in "
                "docs/runs/; do not edit -->"]
    if rec is None:
        L += ["", "**No full run yet.** The table of `make bench-decisions` (the agent as shipped against every "
                  "static setting, on RocksDB, PostgreSQL, a source-tree search and a backup beside OLTP) is "
                  "generated here from the latest full run in [`docs/runs/`](docs/runs/README.md); the runs "
                  "there so far (smoke tests, custom or cut-short runs) are not results.", ""]
    else:
        S = Stats(rec)
        name = os.path.basename(p)[:-5]
        best = S.best_static_total()
        L += ["", f"From [`{name}`]({link_prefix}{name}.md): {len(S.complete)} repetitions, commit "
                  f"`{rec['git']['commit'][:9]}`, kernel {rec['host']['kernel']}, "
                  f"{rec['host']['cpus']} CPUs. Median wall time, seconds (95 % interval).", "",
              f"| workload | defaults `{S.default}` | best static | agent | agent / best static | agent / defaults |",
              "|---|---:|---|---:|---:|---:|"]
        for w in S.workloads:
            bs = S.best_static(w)
            lo, hi = S.boot(lambda rs, w=w: S.med("agent", w, rs) / S.med(S.best_static(w, rs), w, rs))
            lo2, hi2 = S.boot(lambda rs, w=w: S.med("agent", w, rs) / S.med(S.default, w, rs))
            L.append(f"| {w} | {f2(S.med(S.default, w))} | `{bs}` {f2(S.med(bs, w))} | {f2(S.med('agent', w))} | "
                     f"{S.med('agent', w) / S.med(bs, w):.3f} ({lo:.3f}–{hi:.3f}) | "
                     f"{S.med('agent', w) / S.med(S.default, w):.3f} ({lo2:.3f}–{hi2:.3f}) |")
        lo, hi = S.boot(lambda rs: S.total("agent", rs) / S.total(S.best_static_total(rs), rs))
        lo2, hi2 = S.boot(lambda rs: S.total("agent", rs) / S.total(S.default, rs))
        L.append(f"| **total** | {f2(S.total(S.default))} | `{best}` {f2(S.total(best))} | {f2(S.total('agent'))} | "
                 f"{S.total('agent') / S.total(best):.3f} ({lo:.3f}–{hi:.3f}) | "
                 f"{S.total('agent') / S.total(S.default):.3f} ({lo2:.3f}–{hi2:.3f}) |")
        L += ["", "Issue 43's bars: " + "; ".join(
            f"{b['bar']}: **{'PASS' if b['pass'] else 'FAIL'}** ({b['value']})" for b in S.bars()) + ".", ""]
    L.append(END)
    return "\n".join(L)


def splice_readme(text, block):
    """text with its marker-delimited block replaced by block; ValueError
    when the markers are missing or out of order."""
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        raise ValueError(f"README.md has no {BEGIN} … {END} block")
    return text[:i] + block + text[j + len(END):]
