#!/usr/bin/env python3
"""Helpers of hack/bench-decisions.sh (the decision-quality benchmark).

Sub-commands (all deterministic: the same arguments give the same I/O):
  gen-tree DIR NFILES SEED      a source-tree-like directory: NFILES files of
                                4-64 KiB (multiples of 4 KiB), 50 per directory
  tac FILE NBYTES               read the last NBYTES of FILE backward in 8 KiB
                                preads, as tac(1) does (KDSim/DADS §5 TAC)
  memmix MMAP READS PHASES SEED SCAN...
                                PHASES rounds of: READS random 4 KiB reads
                                through an mmap of MMAP, then a sequential
                                scan (8 KiB read()s, BENCH_SCAN_KIB) of the SCAN files;
                                prints the time of each phase as JSON
  mapmix MMAP READS PHASES SEED SCAN_MIB
                                PHASES rounds of: READS random 4 KiB reads
                                through an mmap of MMAP, then a sequential
                                scan of SCAN_MIB of the same mapping (one
                                byte of each 4 KiB page, in order; round p
                                from p × SCAN_MIB, wrapping), as a database
                                or search index that looks up through its
                                mapping, then scans or merges it; prints
                                the time of each phase as JSON
  report RUNS.json OUT.json [--markdown]
                                the statistics of a run (text on stdout;
                                --markdown: also the median table in Markdown)
  pool A B RUNS.json...         setting A against setting B over several runs
                                (each a BENCH_OUT's bench-decisions.raw.json)
                                whose repetitions ran both: per workload and
                                for the total, the medians over all their
                                repetitions and A/B with a 95 % bootstrap
                                interval, each resample drawing repetitions
                                within each run (a Markdown table)
"""
import json
import mmap
import os
import random
import statistics as st
import sys
import time


def gen_tree(root, nfiles, seed):
    rng = random.Random(seed)
    total = 0
    for i in range(nfiles):
        d = os.path.join(root, f"d{i // 50:03d}")
        if i % 50 == 0:
            os.makedirs(d, exist_ok=True)
        size = rng.randint(1, 16) * 4096
        with open(os.path.join(d, f"f{i:05d}.c"), "wb") as f:
            f.write(rng.randbytes(size))
        total += size
    print(total)


def tac(path, nbytes):
    fd = os.open(path, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size
        start = max(0, end - nbytes)
        off, n = end, 0
        while off > start:
            step = min(8192, off - start)
            off -= step
            n += len(os.pread(fd, step, off))
    finally:
        os.close(fd)
    print(n)


# The scans' read() size, bytes (BENCH_SCAN_KIB; 8 KiB by default).
SCAN_BYTES = int(os.environ.get("BENCH_SCAN_KIB", "8")) * 1024


def phase_mix(path, reads, phases, seed, scan):
    """PHASES rounds of READS random 4 KiB reads through an mmap of path,
    then scan(m, pages, p) (round p; it returns a byte folded into the
    checksum); prints the time of each phase as JSON."""
    out = {"mmap_s": [], "scan_s": []}
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    m = mmap.mmap(fd, size, prot=mmap.PROT_READ)  # no madvise: the kernel's read-around applies
    pages = size // 4096
    sink = 0
    for p in range(phases):
        rng = random.Random(seed * 1000 + p)
        t0 = time.perf_counter()
        for _ in range(reads):
            off = rng.randrange(pages) * 4096
            sink ^= m[off:off + 4096][-1]
        out["mmap_s"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        sink ^= scan(m, pages, p)
        out["scan_s"].append(time.perf_counter() - t0)
    m.close()
    os.close(fd)
    out["sink"] = sink
    print(json.dumps(out))


def memmix(path, reads, phases, seed, scans):
    def scan(m, pages, p):
        for s in scans:
            with open(s, "rb", buffering=0) as f:
                while f.read(SCAN_BYTES):
                    pass
        return 0
    phase_mix(path, reads, phases, seed, scan)


def mapmix(path, reads, phases, seed, scan_mib):
    def scan(m, pages, p):
        span = min(pages, scan_mib * 256)
        first, sink = p * span % pages, 0
        for i in range(span):
            sink ^= m[((first + i) % pages) * 4096]
        return sink
    phase_mix(path, reads, phases, seed, scan)


# --- statistics ------------------------------------------------------------

SEED = 1
BOOT = 10000


def pct(boot, q):
    return boot[min(len(boot) - 1, int(q * len(boot)))]


def regret(t, cols, statics, default, complete, ws, label):
    """Prints and returns the agent's regret over the workloads ws: its
    median total over them against the best static setting's (chosen over
    ws), the per-workload oracle's and the device defaults', each with a 95 %
    bootstrap interval (the repetitions resampled BOOT times; the best
    static and the oracle chosen again in every resample)."""
    def med(s, w, rs):
        return st.median(t[(s, w)][rep] for rep in rs)
    per_rep = {s: {rep: sum(t[(s, w)][rep] for w in ws) for rep in complete} for s in cols}
    tot = {s: st.median(per_rep[s].values()) for s in cols}
    best = min(statics, key=lambda s: tot[s])
    oracle = sum(min(med(s, w, complete) for s in statics) for w in ws)
    rng = random.Random(SEED)
    b_static, b_oracle, b_default = [], [], []
    for _ in range(BOOT):
        rs = rng.choices(complete, k=len(complete))
        ag = st.median(per_rep["agent"][r] for r in rs)
        b_static.append(ag / min(st.median(per_rep[s][r] for r in rs) for s in statics))
        b_oracle.append(ag / sum(min(med(s, w, rs) for s in statics) for w in ws))
        if default in per_rep:
            b_default.append(ag / st.median(per_rep[default][r] for r in rs))
    for b in (b_static, b_oracle, b_default):
        b.sort()
    r_static, r_oracle = tot["agent"] / tot[best], tot["agent"] / oracle
    r_default = tot["agent"] / tot[default] if default in tot else float("nan")
    print()
    print(f"over {label}: agent {tot['agent']:.3f} s; best static {best} {tot[best]:.3f} s; "
          f"oracle {oracle:.3f} s" + (f"; defaults {tot[default]:.3f} s" if default in tot else ""))
    print(f"  regret vs the best static ({best}): ratio {r_static:.3f}, 95 % bootstrap interval "
          f"{pct(b_static, .025):.3f}-{pct(b_static, .975):.3f}")
    print(f"  regret vs the per-workload oracle:   ratio {r_oracle:.3f}, 95 % bootstrap interval "
          f"{pct(b_oracle, .025):.3f}-{pct(b_oracle, .975):.3f}")
    if b_default:
        print(f"  vs the device's defaults ({default}):  ratio {r_default:.3f}, 95 % bootstrap interval "
              f"{pct(b_default, .025):.3f}-{pct(b_default, .975):.3f}")
    print(f"  (bootstrap: {BOOT} resamples of the {len(complete)} repetitions, seed {SEED})")
    return {
        "workloads": ws, "total_s": tot["agent"], "best_static": best, "best_static_s": tot[best], "oracle_s": oracle,
        "regret_best_static": [r_static, pct(b_static, .025), pct(b_static, .975)],
        "regret_oracle": [r_oracle, pct(b_oracle, .025), pct(b_oracle, .975)],
        "vs_default": [r_default, pct(b_default, .025), pct(b_default, .975)] if b_default else None,
    }


def versus(t, a, b, complete, ws):
    """Returns the ratio of a's median total over ws to b's, with a 95 %
    bootstrap interval (the repetitions resampled BOOT times)."""
    per_rep = {s: {rep: sum(t[(s, w)][rep] for w in ws) for rep in complete} for s in (a, b)}
    ratio = st.median(per_rep[a].values()) / st.median(per_rep[b].values())
    rng = random.Random(SEED)
    boot = []
    for _ in range(BOOT):
        rs = rng.choices(complete, k=len(complete))
        boot.append(st.median(per_rep[a][r] for r in rs) / st.median(per_rep[b][r] for r in rs))
    boot.sort()
    return [ratio, pct(boot, .025), pct(boot, .975)]


def report(runs_path, out_path, markdown=False):
    raw = json.load(open(runs_path))
    runs = raw["runs"]
    settings = raw["settings"]  # in the order of the list (BENCH_SETTINGS), not of any repetition
    default = raw["default_setting"]
    workloads = raw["workloads"]  # the primary ones, in sequence order; totals sum these
    derived = raw.get("derived", {})  # name -> list of primary workloads summed (AIR-n)
    extra = raw.get("extra", [])  # shown, not summed (the memory mix's sub-phases)
    reps = sorted({r["rep"] for r in runs})
    t = {}  # (setting, workload) -> {rep: seconds}
    thr = {}
    for r in runs:
        t.setdefault((r["setting"], r["workload"]), {})[r["rep"]] = r["wall_s"]
        if r.get("mib_s") is not None:
            thr.setdefault((r["setting"], r["workload"]), []).append(r["mib_s"])
    for name, parts in derived.items():
        for s in settings:
            if all((s, w) in t for w in parts):
                t[(s, name)] = {rep: sum(t[(s, w)][rep] for w in parts)
                                for rep in reps if all(rep in t[(s, w)] for w in parts)}
    complete = [rep for rep in reps if all(rep in t.get((s, w), {}) for s in settings for w in workloads)]
    if not complete:
        print("bench-decisions: no complete repetition: nothing to report", file=sys.stderr)
        return 1
    statics = [s for s in settings if s != "agent" and not s.startswith("agent.")]
    has_agent = "agent" in settings

    def med(s, w, rs):
        return st.median(t[(s, w)][rep] for rep in rs)

    def total(s, rs):
        return st.median(sum(t[(s, w)][rep] for w in workloads) for rep in rs)

    rows = workloads + [d for d in derived] + [e for e in extra if any((s, e) in t for s in settings)]
    cols = settings
    wcol = max(len(w) for w in rows + ["total"]) + 1
    print()
    print(f"median wall time (s) over {len(complete)} repetition(s); "
          f"'!' = slower than the device's defaults ({default}) by more than 5 %")
    print(" " * wcol + "".join(f"{c:>17}" for c in cols))
    table = {}
    for w in rows:
        line = f"{w:<{wcol}}"
        for s in cols:
            if (s, w) not in t or not all(rep in t[(s, w)] for rep in complete):
                line += f"{'-':>17}"
                continue
            v = med(s, w, complete)
            table.setdefault(w, {})[s] = v
            slow = s != default and default in settings and v > 1.05 * med(default, w, complete)
            line += f"{v:>16.3f}{'!' if slow else ' '}"
        print(line)
    line = f"{'total':<{wcol}}"
    totals = {s: total(s, complete) for s in cols}
    for s in cols:
        slow = s != default and default in totals and totals[s] > 1.05 * totals[default]
        line += f"{totals[s]:>16.3f}{'!' if slow else ' '}"
    print(line)
    print(f"(total = the sum of {', '.join(workloads)}; AIR-n rows are sums of their members, "
          "not added again)")
    if thr:
        print()
        print("application throughput, median MiB/s (fio workloads; RR: IOPS = MiB/s × 256)")
        print(" " * wcol + "".join(f"{c:>17}" for c in cols))
        for w in rows:
            if not any((s, w) in thr for s in cols):
                continue
            print(f"{w:<{wcol}}" + "".join(
                f"{st.median(thr[(s, w)]):>17.1f}" if (s, w) in thr else f"{'-':>17}" for s in cols))

    dev = {}
    for r in runs:
        if "dev_read_mib" in r:
            dev.setdefault((r["setting"], r["workload"]), []).append(r["dev_read_mib"])
    if dev:
        print()
        print("MiB read from the loop device, median (read-ahead and read-around included)")
        print(" " * wcol + "".join(f"{c:>17}" for c in cols))
        for w in workloads:
            print(f"{w:<{wcol}}" + "".join(
                f"{st.median(dev[(s, w)]):>17.0f}" if (s, w) in dev else f"{'-':>17}" for s in cols))

    acpu = {}
    for r in runs:
        if r.get("agent_cpu_ms") is not None and (r["setting"] == "agent" or r["setting"].startswith("agent.")):
            acpu.setdefault((r["setting"], r["workload"]), []).append(r["agent_cpu_ms"])
    if acpu:
        acols = [s for s in cols if any((s, w) in acpu for w in workloads)]
        print()
        print("the agent's own CPU time while each workload ran, median ms and % of one CPU "
              "(its threads' schedstat; its BPF programs run in the workloads' own context and are not in it)")
        print(" " * wcol + "".join(f"{c:>17}" for c in acols))
        for w in workloads:
            cells = []
            for s in acols:
                if (s, w) not in acpu:
                    cells.append(f"{'-':>17}")
                    continue
                ms = st.median(acpu[(s, w)])
                cells.append(f"{f'{ms:.1f} ({100 * ms / 1000 / med(s, w, complete):.1f} %)':>17}")
            print(f"{w:<{wcol}}" + "".join(cells))

    summary = {"repetitions": complete, "median_s": table, "total_s": totals, "default": default}
    best = min(statics, key=lambda s: totals[s]) if statics else None
    if best:
        oracle = sum(min(med(s, w, complete) for s in statics) for w in workloads)
        which = {w: min(statics, key=lambda s: med(s, w, complete)) for w in workloads}
        print()
        dflt = f"{totals[default]:.3f} s" if default in totals else "not run"
        print(f"best static by total: {best} ({totals[best]:.3f} s); device defaults {default} "
              f"({dflt}); per-workload oracle {oracle:.3f} s")
        print("per-workload best static: " + ", ".join(f"{w} {s}" for w, s in which.items()))
        summary.update(best_static=best, oracle_s=oracle, oracle_choice=which)
    if has_agent and best:
        suites = [("all workloads", workloads)]
        air_aip = [w for w in workloads if not w.startswith(("MEM", "RR-"))]
        if air_aip and air_aip != workloads:
            suites.append(("the AIR/AIP suite (" + ", ".join(air_aip) + ")", air_aip))
        for w in workloads:
            if w.startswith("MEM"):
                suites.append((w + " alone", [w]))
        summary["agent"] = {}
        for label, ws in suites:
            summary["agent"][label] = regret(t, cols, statics, default, complete, ws, label)
        slow = [w for w in rows if "agent" in table.get(w, {}) and default in table.get(w, {})
                and table[w]["agent"] > 1.05 * table[w][default]]
        print("  workloads where the agent is slower than the device's defaults by more than 5 %: "
              + (", ".join(f"{w} ({table[w]['agent'] / table[w][default]:.2f}×)" for w in slow) or "none"))
        summary["agent"]["slower_than_default"] = slow
        variants = [s for s in cols if s.startswith("agent.")]
        if variants:
            print()
            print("variants of the agent (ratio of median totals over all workloads, 95 % bootstrap interval):")
            summary["variants"] = {}
            for v in variants:
                summary["variants"][v] = {}
                for base in ("agent", default):
                    if base in cols:
                        r = versus(t, v, base, complete, workloads)
                        summary["variants"][v][base] = r
                        print(f"  {v} / {base}: {r[0]:.3f} ({r[1]:.3f}-{r[2]:.3f})")
        ev = raw.get("agent_events", [])
        if ev:
            print()
            print("the agent's changes (repetition, seconds into its sequence, during workload: change):")
            for e in ev:
                print(f"  rep {e['rep']} {e['t_s']:7.1f} s  {e.get('workload') or '(between workloads)':<10} {e['change']}")
        states = [r for r in runs if r["setting"] == "agent" and r["workload"] in workloads]
        if states:
            print()
            print("the device during the agent's workloads (scheduler/read_ahead_kb at start -> end):")
            for rep in reps:
                seq = [r for r in states if r["rep"] == rep]
                print(f"  rep {rep}: " + "; ".join(f"{r['workload']} {r['state0']}->{r['state1']}" for r in seq))
    if markdown:
        short = lambda s: s.replace("mq-deadline", "mq-dl")
        print()
        print("| workload | " + " | ".join(short(s) for s in cols) + " |")
        print("|---|" + "---:|" * len(cols))
        for w in rows:
            print(f"| {w} | " + " | ".join(
                (f"{table[w][s]:.2f}" + ("!" if s != default and default in table[w]
                                         and table[w][s] > 1.05 * table[w][default] else ""))
                if s in table.get(w, {}) else "-" for s in cols) + " |")
        print("| **total** | " + " | ".join(
            f"**{totals[s]:.2f}**" + ("!" if s != default and default in totals and totals[s] > 1.05 * totals[default] else "")
            for s in cols) + " |")
    json.dump({"summary": summary, **raw}, open(out_path, "w"), indent=1)
    return 0


def pool(a, b, paths):
    """Prints, as a Markdown table, setting a against setting b over the
    runs in paths (see the module's doc): the medians over every repetition
    of every run that ran both, and the ratio a/b of the medians with a
    95 % bootstrap interval, the repetitions resampled BOOT times within
    each run (a stratified bootstrap: no run outweighs its own size)."""
    t, ws, reps = {}, [], []  # t: (run, rep, setting, workload) -> seconds
    for i, path in enumerate(paths):
        try:
            with open(path) as f:
                raw = json.load(f)
            ws += [w for w in raw["workloads"] if w not in ws]
            for r in raw["runs"]:
                if "workload" in r and r["setting"] in (a, b):
                    t[(i, r["rep"], r["setting"], r["workload"])] = r["wall_s"]
            reps.append(sorted({r["rep"] for r in raw["runs"] if "workload" in r}))
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"pool: {path}: not a bench-decisions.raw.json: {e!r}", file=sys.stderr)
            return 1
    strata = [[(i, rep) for rep in rs if all((i, rep, s, w) in t for s in (a, b) for w in ws)]
              for i, rs in enumerate(reps)]
    keys = [k for st_ in strata for k in st_]
    if not keys:
        print(f"pool: no repetition ran both {a} and {b} over every workload", file=sys.stderr)
        return 1

    def med(ks, s, w):
        if w == "total":
            return st.median(sum(t[(k[0], k[1], s, x)] for x in ws) for k in ks)
        return st.median(t[(k[0], k[1], s, w)] for k in ks)
    rng = random.Random(SEED)
    boots = [[k for st_ in strata for k in rng.choices(st_, k=len(st_))] for _ in range(BOOT // 5)]
    print(f"{len(keys)} repetitions in {len(paths)} runs; bootstrap: {len(boots)} resamples within each run, seed {SEED}")
    print()
    print(f"| workload | {b} | {a} | {a} / {b} |")
    print("|---|---:|---:|---|")
    for w in ws + ["total"]:
        r = med(keys, a, w) / med(keys, b, w)
        bs = sorted(med(ks, a, w) / med(ks, b, w) for ks in boots)
        print(f"| {w} | {med(keys, b, w):.3f} | {med(keys, a, w):.3f} | {r:.3f} ({pct(bs, .025):.3f}–{pct(bs, .975):.3f}) |")
    return 0


def main(argv):
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "gen-tree":
        gen_tree(argv[2], int(argv[3]), int(argv[4]))
    elif cmd == "tac":
        tac(argv[2], int(argv[3]))
    elif cmd == "memmix":
        memmix(argv[2], int(argv[3]), int(argv[4]), int(argv[5]), argv[6:])
    elif cmd == "mapmix":
        mapmix(argv[2], int(argv[3]), int(argv[4]), int(argv[5]), int(argv[6]))
    elif cmd == "report":
        return report(argv[2], argv[3], markdown="--markdown" in argv[4:])
    elif cmd == "pool" and len(argv) >= 5:
        return pool(argv[2], argv[3], argv[4:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
