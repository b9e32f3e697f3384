"""The workloads of the decision benchmark: real applications (the default
suite) and the old synthetic workloads (diagnostics).

Every workload is a fixed amount of work done by processes started afresh
in a memory-limited pod; it returns its wall time and its own metrics
(ops/s, TPS, latency percentiles, seconds of a scan, MB/s of a backup).
"""
import os
import re
import shutil
import subprocess
import threading
import time

from .host import BenchError, in_pod, log, sh

PGBIN = "/usr/lib/postgresql/15/bin"
# Debian packages each application comes from, and a file that shows it is there.
PACKAGES = {
    "rocksdb": {"rocksdb-tools": "/usr/bin/db_bench"},
    "postgres": {"postgresql-15": f"{PGBIN}/postgres", "postgresql-client-15": f"{PGBIN}/pgbench"},
    "search": {"ripgrep": "/usr/bin/rg"},
    "diag": {"fio": "/usr/bin/fio"},
}
NEEDS = {"rocksdb-pread": ["rocksdb"], "rocksdb-mmap": ["rocksdb"], "rocksdb-scan": ["rocksdb"],
         "rocksdb-rww": ["rocksdb"], "pg-select": ["postgres"], "pg-tpcb-scan": ["postgres"],
         "search": ["search"], "backup-oltp": ["postgres"]}
# The reporting query of pg-tpcb-scan: a parallel sequential scan of the
# whole of pgbench_accounts (count(*) alone is answered from the primary
# key's index).
REPORT_QUERY = "SELECT count(*), sum(abalance) FROM pgbench_accounts"
SEARCH_PATTERN = r"func [A-Za-z_]+\([a-z]+ context\.Context"

# Random direct 4 KiB I/O (fio, libaio) over the diagnostics' mapped file:
# workload -> (fio's --rw, queue depth); the mix reads 70 %.
RANDOM_DIRECT = {"RR-4k-QD32": ("randread", 32), "RR-4k-QD1": ("randread", 1), "RW-70-QD16": ("randrw", 16)}

DB_RE = re.compile(r"^(\w+)\s*:\s*([0-9.]+) micros/op ([0-9]+) ops/sec", re.M)
PCT_RE = re.compile(r"Percentiles: P50: ([0-9.]+) P75: ([0-9.]+) P99: ([0-9.]+) P99\.9: ([0-9.]+)")


def needs(workloads):
    apps = set()
    for w in workloads:
        apps.update(NEEDS.get(w, ["diag"]))
    return apps


class Proc:
    """A process started in a pod; its output in out (a file)."""

    def __init__(self, what, cmd, out, cwd=None):
        self.what, self.out = what, out
        self.f = open(out, "w")
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(cmd, stdout=self.f, stderr=subprocess.STDOUT, cwd=cwd,
                                  start_new_session=True)
        self.t1 = None

    def poll(self):
        if self.t1 is None and self.p.poll() is not None:
            self.t1 = time.monotonic()
        return self.t1 is not None

    def wait(self):
        self.p.wait()
        self.poll()
        self.f.close()
        if self.p.returncode != 0:
            tail = open(self.out, errors="replace").read().strip().splitlines()[-3:]
            raise BenchError(f"{self.what} failed (exit {self.p.returncode}): {' | '.join(tail)}")
        return open(self.out, errors="replace").read()

    def kill(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, 9)
            except ProcessLookupError:
                pass
            self.p.wait()


# A workload still running after this long has hung: the run stops.
TIMEOUT_S = 1800


def run_together(procs):
    """Waits for every process (all already started); returns their outputs
    and each one's seconds; the first failure is raised after the others
    were stopped."""
    try:
        while not all(p.poll() for p in procs):
            if time.monotonic() - procs[0].t0 > TIMEOUT_S:
                raise BenchError(f"{procs[0].what}: still running after {TIMEOUT_S} s")
            time.sleep(0.02)
        return [(p.wait(), p.t1 - p.t0) for p in procs]
    finally:
        for p in procs:
            p.kill()


def percentiles(vals, qs=(50, 95, 99)):
    if not vals:
        return {}
    v = sorted(vals)
    return {f"p{q}": v[min(len(v) - 1, int(q / 100 * len(v)))] for q in qs}


class Apps:
    """The applications' data, set up once per run on the test file system,
    and their workloads."""

    def __init__(self, plan, dev, pods, tmp, repo, helper):
        self.plan, self.sz, self.dev, self.pods, self.tmp = plan, plan["sizes"], dev, pods, tmp
        self.repo, self.helper = repo, helper
        self.mnt = dev.mnt
        self.apps = needs(plan["workloads"])
        self.pg_up = False
        self.work = os.path.join(tmp, "work")
        os.makedirs(self.work)
        os.chmod(tmp, 0o755)  # the postgres user reaches its socket and logs
        self.pg_files = self.rocks_files = self.search_files = self.diag_files = None
        self.facts = {}

    # --- set-up (not timed, not throttled: outside the pods) -------------------

    def setup(self, cleanup):
        t = time.monotonic()
        mem = self.plan["pod_memory"]
        if "rocksdb" in self.apps:
            self.rocks_files = self.pods.pod("rocksdb", mem)
            self.setup_rocksdb()
        if "postgres" in self.apps:
            self.pg_files = self.pods.pod("postgres", mem)
            self.backup_files = self.pods.pod("backup", mem)
            cleanup.push("stop PostgreSQL", self.pg_stop)
            self.setup_postgres()
        if "search" in self.apps:
            self.search_files = self.pods.pod("search", mem)
            self.setup_search()
        if "diag" in self.apps:
            self.diag_files = self.pods.pod("diag", mem)
            self.setup_diag()
        os.sync()
        self.facts["setup_s"] = round(time.monotonic() - t, 1)
        return self.facts

    def db_common(self):
        s = self.sz
        return ["db_bench", f"--db={self.mnt}/rocks", f"--num={s['rocksdb_keys']}", "--key_size=16",
                f"--value_size={s['rocksdb_value_size']}", "--compression_type=none"]

    def setup_rocksdb(self):
        pristine = f"{self.mnt}/rocks.pristine"
        sh(self.db_common() + ["--benchmarks=fillseq,compact,waitforcompaction", "--use_existing_db=0",
                               "--disable_wal=1", "--threads=1", "--seed=42"])
        os.rename(f"{self.mnt}/rocks", pristine)
        size = sum(os.path.getsize(os.path.join(pristine, f)) for f in os.listdir(pristine))
        self.facts["rocksdb_db_mib"] = round(size / 2**20)
        self.facts["rocksdb_sst_files"] = len([f for f in os.listdir(pristine) if f.endswith(".sst")])

    def rocks_restore(self):
        """The database as set up, before every RocksDB workload: its
        tables (immutable) hard-linked, its other files (MANIFEST, logs,
        OPTIONS, written on every open) copied."""
        d, p = f"{self.mnt}/rocks", f"{self.mnt}/rocks.pristine"
        if os.path.exists(d):
            shutil.rmtree(d)
        os.mkdir(d)
        for f in os.listdir(p):
            if f.endswith(".sst"):
                os.link(os.path.join(p, f), os.path.join(d, f))
            else:
                shutil.copy2(os.path.join(p, f), os.path.join(d, f))

    def setup_postgres(self):
        self.pgdata = f"{self.mnt}/pg"
        self.pgsock = os.path.join(self.tmp, "pgsock")
        for d in (self.pgdata, self.pgsock):
            os.makedirs(d)
            shutil.chown(d, "postgres", "postgres")
        os.chmod(self.pgdata, 0o700)
        self.pgport = 5432  # Unix socket only, in pgsock: no port is opened
        sh(["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", f"{PGBIN}/initdb",
            "-D", self.pgdata, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"])
        self.pg_start(files=None)
        self.psql_out(f"-c", "SELECT 1")
        sh(self.as_pg([f"{PGBIN}/pgbench", *self.pg_conn(), "-i", "-q", "-s", str(self.sz["pg_scale"]), "postgres"]))
        self.psql_out("-c", "CHECKPOINT")
        sizes = self.psql_out("-Atc", "SELECT pg_relation_size('pgbench_accounts'), pg_database_size('postgres')")
        acc, db = (int(x) for x in sizes.strip().split("|"))
        self.facts["pg_accounts_mib"] = round(acc / 2**20)
        self.facts["pg_database_mib"] = round(db / 2**20)
        self.pg_stop()

    def as_pg(self, cmd):
        return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", *cmd]

    def pg_conn(self):
        return ["-h", self.pgsock, "-p", str(self.pgport), "-U", "postgres"]

    def psql_out(self, *args):
        return sh(self.as_pg([f"{PGBIN}/psql", *self.pg_conn(), "-X", *args, "postgres"]))

    def pg_start(self, files):
        opts = (f"-c listen_addresses='' -c unix_socket_directories='{self.pgsock}' -c port={self.pgport} "
                f"-c shared_buffers={self.sz['pg_shared_buffers']}")
        cmd = [f"{PGBIN}/pg_ctl", "-D", self.pgdata, "-l", f"{self.pgsock}/server.log", "-w", "-t", "120",
               "-o", opts, "start"]
        sh(in_pod(files, cmd, user="postgres") if files else self.as_pg(cmd))
        self.pg_up = True

    def pg_stop(self):
        if self.pg_up:
            r = subprocess.run(self.as_pg([f"{PGBIN}/pg_ctl", "-D", self.pgdata, "-w", "-t", "60", "-m", "fast", "stop"]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                log(f"pg_ctl stop: {r.stderr.strip()}; killing the postgres pod")
                self.pods.kill("postgres")
            self.pg_up = False

    def setup_search(self):
        goroot = sh(["go", "env", "GOROOT"], check=False).strip() if shutil.which("go") else ""
        goroot = goroot or "/usr/local/go"
        self.trees = []
        for i, tree in enumerate(self.sz["search_trees"]):
            dst = f"{self.mnt}/src{i}"
            if tree in ("goroot", "goroot/src"):
                src = goroot + ("/src" if tree == "goroot/src" else "")
                if not os.path.isdir(src):
                    raise BenchError(f"search tree {tree}: {src} is not a directory (is Go installed?)")
                sh(["cp", "-a", src, dst])
            elif tree == "repo":
                sh(["git", "clone", "-q", "--local", "--no-hardlinks", self.repo, dst])
            self.trees.append(dst)
        files = size = 0
        for t in self.trees:
            for root, _, fs in os.walk(t):
                for f in fs:
                    p = os.path.join(root, f)
                    if os.path.isfile(p) and not os.path.islink(p):
                        files += 1
                        size += os.path.getsize(p)
        self.facts["search_files"] = files
        self.facts["search_mib"] = round(size / 2**20)

    # --- sequences ---------------------------------------------------------------

    def start_sequence(self):
        if "postgres" in self.apps and (self.plan["postgres_restart"] == "per-sequence" or not self.pg_up):
            self.pg_start(self.pg_files)

    def end_sequence(self, last=False):
        if "postgres" in self.apps and (self.plan["postgres_restart"] == "per-sequence" or last):
            self.pg_stop()

    # --- the workloads -------------------------------------------------------------

    def run(self, w, out):
        """Runs workload w; out is a path prefix for its outputs. Returns
        (wall seconds, metrics)."""
        fn = {"rocksdb-pread": self.rocksdb_pread, "rocksdb-mmap": self.rocksdb_mmap,
              "rocksdb-scan": self.rocksdb_scan, "rocksdb-rww": self.rocksdb_rww,
              "pg-select": self.pg_select, "pg-tpcb-scan": self.pg_tpcb_scan,
              "search": self.search, "backup-oltp": self.backup_oltp}.get(w)
        if fn is None:
            return self.diag(w, out)
        return fn(out)

    def prepare(self, w):
        """What a workload needs before its caches are dropped (not timed)."""
        if w.startswith("rocksdb-"):
            self.rocks_restore()

    def db_bench(self, out, bench, extra):
        s = self.sz
        cmd = self.db_common() + [f"--benchmarks={bench}", "--use_existing_db=1",
                                  f"--cache_size={s['rocksdb_cache_mib'] << 20}", "--histogram=1", *extra]
        p = Proc(f"db_bench {bench}", in_pod(self.rocks_files, cmd), out + ".db_bench.txt")
        (txt, sec), = run_together([p])
        m = {m.group(1): m for m in DB_RE.finditer(txt)}
        if bench not in m:
            raise BenchError(f"db_bench {bench}: no result line in its output ({out}.db_bench.txt)")
        met = {"ops_s": float(m[bench].group(3))}
        pc = PCT_RE.search(txt)
        if pc:
            met.update(p50_us=float(pc.group(1)), p99_us=float(pc.group(3)), p999_us=float(pc.group(4)))
        return sec, met

    def rocksdb_pread(self, out):
        return self.db_bench(out, "readrandom", [f"--reads={self.sz['rocksdb_pread_reads']}", "--threads=1", "--seed=7"])

    def rocksdb_mmap(self, out):
        # advise_random_on_open=0: no MADV_RANDOM on the mapped tables, so
        # the kernel's fault read-around (read_ahead_kb) applies, as for any
        # mapping its user does not advise.
        return self.db_bench(out, "readrandom", [f"--reads={self.sz['rocksdb_mmap_reads']}", "--threads=1",
                                                 "--seed=8", "--mmap_read=1", "--advise_random_on_open=0"])

    def rocksdb_scan(self, out):
        return self.db_bench(out, "seekrandom", [f"--reads={self.sz['rocksdb_scan_seeks']}", "--threads=1",
                                                 f"--seek_nexts={self.sz['rocksdb_seek_nexts']}", "--seed=9"])

    def rocksdb_rww(self, out):
        return self.db_bench(out, "readwhilewriting", [
            f"--reads={self.sz['rocksdb_rww_reads']}", f"--threads={self.sz['rocksdb_rww_threads']}",
            f"--benchmark_write_rate_limit={self.sz['rocksdb_rww_write_bps']}", "--seed=10"])

    def pgbench(self, out, label, script_args, clients, tx):
        logdir = f"{self.pgsock}/log-{label}"
        if os.path.exists(logdir):
            shutil.rmtree(logdir)
        os.mkdir(logdir)
        shutil.chown(logdir, "postgres", "postgres")
        cmd = [f"{PGBIN}/pgbench", *self.pg_conn(), "-n", *script_args, "-c", str(clients), "-j", str(clients),
               "-t", str(tx), "--random-seed=43", "--log", "--log-prefix", f"{logdir}/tx", "postgres"]
        return Proc(f"pgbench {label}", in_pod(self.pg_files, cmd, user="postgres"), f"{out}.{label}.txt", cwd=logdir)

    def pgbench_metrics(self, txt, label, prefix=""):
        logdir = f"{self.pgsock}/log-{label}"
        tps = re.search(r"^tps = ([0-9.]+)", txt, re.M)
        lat = re.search(r"^latency average = ([0-9.]+) ms", txt, re.M)
        if not tps or not lat:
            raise BenchError(f"pgbench {label}: no tps or latency line in its output")
        lats = []
        for f in os.listdir(logdir):
            for line in open(os.path.join(logdir, f)):
                parts = line.split()
                if len(parts) >= 3:
                    lats.append(int(parts[2]) / 1000.0)  # µs -> ms
        shutil.rmtree(logdir)
        met = {prefix + "tps": float(tps.group(1)), prefix + "lat_avg_ms": float(lat.group(1))}
        for k, v in percentiles(lats).items():
            met[f"{prefix}lat_{k}_ms"] = round(v, 3)
        return met

    def pg_select(self, out):
        s = self.sz
        p = self.pgbench(out, "select", ["-S"], s["pg_clients"], s["pg_select_tx"])
        (txt, sec), = run_together([p])
        return sec, self.pgbench_metrics(txt, "select")

    def pg_tpcb_scan(self, out):
        s = self.sz
        scan = Proc("reporting scan", in_pod(self.pg_files, [f"{PGBIN}/psql", *self.pg_conn(), "-X", "-Atc",
                                                              REPORT_QUERY, "postgres"], user="postgres"),
                    out + ".scan.txt")
        tpcb = self.pgbench(out, "tpcb", [], s["pg_clients"], s["pg_tpcb_tx"])
        t0 = time.monotonic()
        (stxt, ssec), (ttxt, tsec) = run_together([scan, tpcb])
        wall = time.monotonic() - t0
        met = self.pgbench_metrics(ttxt, "tpcb")
        met["scan_s"] = round(ssec, 3)
        return wall, met

    def backup_oltp(self, out):
        s = self.sz
        # tar's exit 1 is "a file changed as we read it": the server is up.
        cmd = ["bash", "-c", 'set -o pipefail; tar -cf - -C "$1" base | cat >/dev/null; rc=$?; ((rc <= 1))',
               "bash", self.pgdata]
        backup = Proc("backup (tar of the PostgreSQL data directory's base)", in_pod(self.backup_files, cmd),
                      out + ".backup.txt")
        oltp = self.pgbench(out, "oltp", ["-S"], 1, s["pg_backup_oltp_tx"])
        t0 = time.monotonic()
        (_, bsec), (otxt, _) = run_together([backup, oltp])
        wall = time.monotonic() - t0
        met = self.pgbench_metrics(otxt, "oltp")
        met["backup_s"] = round(bsec, 3)
        met["backup_mib_s"] = round(self.base_mib() / bsec, 1)
        return wall, met

    def base_mib(self):
        if not hasattr(self, "_base_mib"):
            n = 0
            for root, _, fs in os.walk(f"{self.pgdata}/base"):
                n += sum(os.path.getsize(os.path.join(root, f)) for f in fs)
            self._base_mib = n / 2**20
        return self._base_mib

    def search(self, out):
        cmd = ["rg", "--no-messages", "--no-ignore", "--hidden", "-c", "-e", SEARCH_PATTERN, *self.trees]
        p = Proc("rg", in_pod(self.search_files, cmd), out + ".rg.txt")
        try:
            p.p.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            p.kill()
            raise BenchError(f"rg: still running after {TIMEOUT_S} s")
        finally:
            p.poll()
            p.f.close()
        if p.p.returncode not in (0, 1):  # 1: no match
            raise BenchError(f"rg failed (exit {p.p.returncode})")
        txt = open(p.out, errors="replace").read()
        matches = sum(int(line.rsplit(":", 1)[1]) for line in txt.splitlines() if ":" in line)
        sec = p.t1 - p.t0
        return sec, {"files_s": round(self.facts["search_files"] / sec, 1),
                     "mib_s": round(self.facts["search_mib"] / sec, 1), "matches": matches}

    # --- diagnostics: the old synthetic workloads (fio, tac, find, MEM) ----------

    def setup_diag(self):
        s = self.sz
        self.big = [f"{self.mnt}/big{i}" for i in range(4)]
        for i, f in enumerate(self.big):
            sh(["fio", "--name=fill", f"--filename={f}", f"--size={s['diag_big_mib']}M", "--rw=write", "--bs=1M",
                "--direct=1", "--ioengine=psync", f"--randseed={7 + i}", "--output=/dev/null"])
        self.mm = f"{self.mnt}/mm.dat"
        sh(["fio", "--name=fill", f"--filename={self.mm}", f"--size={s['diag_mm_mib']}M", "--rw=write", "--bs=1M",
            "--direct=1", "--ioengine=psync", "--randseed=11", "--output=/dev/null"])
        for i in range(4):
            os.mkdir(f"{self.mnt}/tree{i}")
            sh(["python3", self.helper, "gen-tree", f"{self.mnt}/tree{i}", str(s["diag_tree_files"]), str(100 + i)])

    def diag_proc(self, w, i, out):
        s, f = self.sz, self.big[i]
        fio = ["fio", "--output-format=json", f"--output={out}.{i}.fio.json", "--ioengine=psync", "--direct=0",
               "--fadvise_hint=0", "--invalidate=0", f"--filename={f}"]
        if w == "TAC":
            cmd = ["python3", self.helper, "tac", f, str(8 << 20)]
        elif w == "512k-SR":
            cmd = list(fio)
            for k in range(4):
                cmd += [f"--name=s{k}", f"--offset={k * 4}k", f"--size={s['diag_big_mib'] * 1024 - 16}k",
                        "--rw=read:512k", "--bs=4k"] + (["--stonewall"] if k else [])
        elif w == "8k-SR":
            cmd = fio + ["--name=sr8", "--rw=read:8k", "--bs=4k"]
        elif w == "LKR":
            cmd = ["sh", "-c", 'find "$1" -type f -exec cat {} + >/dev/null', "sh", f"{self.mnt}/tree{i}"]
        elif w == "IOR-R":
            cmd = fio + ["--name=ior", "--rw=read", "--bs=64k"]
        else:
            raise BenchError(f"no diagnostic {w}")
        return Proc(f"{w} process {i}", in_pod(self.diag_files, cmd), f"{out}.{w}.{i}.txt")

    def diag(self, w, out):
        s = self.sz
        if w in ("MEM", "MEMMAP"):
            sub = "memmix" if w == "MEM" else "mapmix"
            tail = self.big if w == "MEM" else [str(4 * s["diag_big_mib"])]
            cmd = ["python3", self.helper, sub, self.mm, str(s["diag_mem_reads"]), str(s["diag_mem_phases"]), "5", *tail]
            (txt, sec), = run_together([Proc(w, in_pod(self.diag_files, cmd), out + ".mem.txt")])
            import json
            j = json.loads(txt.strip().splitlines()[-1])
            return sec, {"mmap_s": round(sum(j["mmap_s"]), 3), "scan_s": round(sum(j["scan_s"]), 3)}
        if w in RANDOM_DIRECT:
            rw, depth = RANDOM_DIRECT[w]
            cmd = ["fio", "--name=rr", f"--filename={self.mm}", f"--rw={rw}", "--rwmixread=70", "--bs=4k",
                   "--direct=1", "--ioengine=libaio", f"--iodepth={depth}", f"--io_size={s['diag_rr_mib']}M",
                   "--randseed=42", "--output-format=terse"]
            (txt, sec), = run_together([Proc(w, in_pod(self.diag_files, cmd), out + ".rr.txt")])
            return sec, {"iops": round(s["diag_rr_mib"] * 256 / sec)}
        base, _, n = w.rpartition("-")
        n = int(n)
        if base == "AIP":
            return self.aip(n, out), {}
        sec = run_together([self.diag_proc(base, i, out) for i in range(n)])
        return max(x[1] for x in sec), {}

    def aip(self, n, out):
        """The five at once, each with n processes; one that ends while
        another is still in its first run starts again; the time is until
        every one has ended its first run (the reruns are then stopped)."""
        members = ["TAC", "512k-SR", "8k-SR", "LKR", "IOR-R"]
        done, stop, errors, live = set(), threading.Event(), [], []
        lock = threading.Lock()

        def member(m):
            try:
                while not stop.is_set():
                    procs = [self.diag_proc(m, i, f"{out}.aip") for i in range(n)]
                    with lock:
                        live.extend(procs)
                    while not all(p.poll() for p in procs):
                        if stop.is_set():
                            return
                        time.sleep(0.02)
                    for p in procs:
                        p.wait()
                    with lock:
                        done.add(m)
            except BenchError as e:
                errors.append(e)
                stop.set()

        t0 = time.monotonic()
        ts = [threading.Thread(target=member, args=(m,)) for m in members]
        for t in ts:
            t.start()
        while len(done) < len(members) and not stop.is_set():
            time.sleep(0.02)
        wall = time.monotonic() - t0
        stop.set()
        with lock:
            for p in live:
                p.kill()
        for t in ts:
            t.join()
        if errors and len(done) < len(members):
            raise errors[0]
        return wall
