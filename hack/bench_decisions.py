#!/usr/bin/env python3
"""make bench-decisions: the decision benchmark of the node agent (issue 43),
its report, index and README generators, and the helpers of its
diagnostic workloads. Python 3 standard library only.

Sub-commands:
  run BINARY                    run the plan (BENCH_PLAN, BENCH_QUICK=1 or
                                hack/bench-plans/default.json, with the
                                BENCH_* overrides; docs/bench-decisions.md),
                                as root; writes docs/runs/DATE-NAME.json and
                                .md and the index
  plan                          validate the plan the environment asks for
                                and print it (no root needed)
  report RUN.json               (re)generate RUN.md from a run's record
  index [DIR]                   (re)generate DIR/README.md (docs/runs)
  readme [--check]              rewrite README.md's bench-decisions block
                                from the latest full run in docs/runs;
                                --check: exit 1 if it, the index or a run's
                                report differs from what is generated
  gen-tree DIR NFILES SEED      (diagnostics) a source-tree-like directory:
                                NFILES files of 4-64 KiB, 50 per directory
  tac FILE NBYTES               (diagnostics) read the last NBYTES of FILE
                                backward in 8 KiB preads, as tac(1) does
  memmix MMAP READS PHASES SEED SCAN...
                                (diagnostics, MEM) PHASES rounds of READS
                                random 4 KiB reads through an mmap of MMAP,
                                then an 8 KiB-read() scan of the SCAN files
  mapmix MMAP READS PHASES SEED SCAN_MIB
                                (diagnostics, MEMMAP) the same lookups, each
                                round then scanning SCAN_MIB of the mapping
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


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = os.path.join(REPO, "docs", "runs")


def tool(cmd, args):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from benchdec import plan as planmod
    from benchdec import report as rep
    if cmd == "run":
        if len(args) != 1:
            print("usage: bench_decisions.py run BINARY", file=sys.stderr)
            return 2
        from benchdec import runner
        return runner.main(args[0], dict(os.environ), REPO, os.path.abspath(__file__))
    if cmd == "plan":
        try:
            p = planmod.from_env(os.environ)
        except planmod.PlanError as e:
            print(f"bench-decisions: {e}", file=sys.stderr)
            return 2
        print(json.dumps(p, indent=1))
        return 0
    if cmd == "report":
        if len(args) != 1:
            print("usage: bench_decisions.py report RUN.json", file=sys.stderr)
            return 2
        print(rep.write_run(args[0]))
        return 0
    if cmd == "index":
        print(rep.write_index(args[0] if args else RUNS))
        return 0
    check = "--check" in args
    readme = os.path.join(REPO, "README.md")
    text = open(readme).read()
    try:
        new = rep.splice_readme(text, rep.readme_block(RUNS))
    except ValueError as e:
        print(f"bench-decisions: {e}", file=sys.stderr)
        return 1
    if not check:
        if new != text:
            with open(readme, "w") as f:
                f.write(new)
        return 0
    stale = []
    if new != text:
        stale.append("README.md's bench-decisions block")
    if open(os.path.join(RUNS, "README.md")).read() != rep.render_index(RUNS):
        stale.append("docs/runs/README.md")
    for p, r in rep.load_runs(RUNS):
        md = p[:-5] + ".md"
        if not os.path.exists(md) or open(md).read() != rep.render_run(r, os.path.basename(p)) + "\n":
            stale.append(os.path.relpath(md, REPO))
        plot = rep.counterfactual.svg(r)
        svg = os.path.join(os.path.dirname(p), rep.svg_name(os.path.basename(p)))
        if plot and (not os.path.exists(svg) or open(svg).read() != plot):
            stale.append(os.path.relpath(svg, REPO))
    if stale:
        print("bench-decisions: not what the generator makes from docs/runs/*.json: " + ", ".join(stale) +
              " (run: python3 hack/bench_decisions.py readme; ... index; ... report RUN.json)", file=sys.stderr)
        return 1
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
    elif cmd in ("run", "plan", "report", "index", "readme"):
        return tool(cmd, argv[2:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
