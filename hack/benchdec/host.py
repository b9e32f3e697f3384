"""What the decision benchmark creates on the host, and puts back.

Everything here is created by the benchmark and undone by Cleanup (LIFO),
also on an error or a signal: a loop device over a sparse file of its own
(checked to be backed by that file before anything is written to it),
ext4 on it, memory-limited "pod" cgroups (v1 or v2), a blk-throttle cap on
that one device, and packages' services that an install started.
"""
import glob
import os
import shlex
import signal
import shutil
import subprocess
import sys
import time


def log(msg):
    print(f"bench-decisions: {msg}", file=sys.stderr, flush=True)


class BenchError(Exception):
    """A failure of the run; str() is one line."""


def sh(cmd, check=True, **kw):
    """Runs cmd (a list); returns its stdout; raises BenchError naming it."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if check and r.returncode != 0:
        err = (r.stderr.strip().splitlines() or ["no message"])[-1]
        raise BenchError(f"{shlex.join(cmd)}: exit {r.returncode}: {err}")
    return r.stdout


def write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def read(path):
    with open(path) as f:
        return f.read().strip()


class Cleanup:
    """A stack of undo steps, run last-first; each step's failure is
    logged and the others still run."""

    def __init__(self):
        self.steps = []

    def push(self, what, fn):
        self.steps.append((what, fn))

    def run(self):
        while self.steps:
            what, fn = self.steps.pop()
            try:
                fn()
            except Exception as e:  # noqa: BLE001 (every step must run)
                log(f"cleanup: {what}: {e}")


def drop_caches():
    os.sync()
    write("/proc/sys/vm/drop_caches", 3)


# --- packages ------------------------------------------------------------------

def ensure_packages(pkgs, cleanup):
    """Installs the Debian packages of pkgs ({package: a file it installs})
    that are missing, with no recommends and no service started
    (policy-rc.d answering 101 during the install); a service an install
    started anyway (PostgreSQL's main cluster) is stopped."""
    missing = [p for p, f in pkgs.items() if not os.path.exists(f)]
    if not missing:
        return []
    log(f"installing {' '.join(missing)} (apt-get, no recommends, no services started)")
    prc = "/usr/sbin/policy-rc.d"
    made = not os.path.exists(prc)
    if made:
        write(prc, "#!/bin/sh\n# shadowtune bench-decisions: no service starts during its install\nexit 101\n")
        os.chmod(prc, 0o755)
    try:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        r = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            sh(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], env=env)
    finally:
        if made:
            os.remove(prc)
    if any(p.startswith("postgresql") for p in missing):
        stop_debian_clusters()
    still = [p for p, f in pkgs.items() if not os.path.exists(f)]
    if still:
        raise BenchError(f"installed {' '.join(missing)} but {', '.join(pkgs[p] for p in still)} is still missing")
    return missing


def stop_debian_clusters():
    """Stops the clusters Debian's postgresql-common created and started
    (e.g. 15/main) where a service manager started them despite
    policy-rc.d; they are left installed and stopped."""
    if not os.path.exists("/usr/bin/pg_lsclusters"):
        return
    for line in sh(["pg_lsclusters", "-h"], check=False).splitlines():
        f = line.split()
        if len(f) >= 4 and f[3] == "online":
            log(f"stopping PostgreSQL cluster {f[0]}/{f[1]} started by its package's install")
            subprocess.run(["pg_ctlcluster", f[0], f[1], "stop"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            subprocess.run(["systemctl", "disable", "--now", f"postgresql@{f[0]}-{f[1]}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# --- the device ---------------------------------------------------------------

class Device:
    """A loop device with direct I/O over a sparse file in dirpath, ext4 on
    it mounted at mnt. Only this device's queue is ever written."""

    def __init__(self, dirpath, gib, cleanup, default_sched):
        self.img = os.path.join(dirpath, "disk.img")
        self.mnt = os.path.join(dirpath, "mnt")
        with open(self.img, "wb") as f:
            f.truncate(gib << 30)
        cleanup.push("remove the image", lambda: os.path.exists(self.img) and os.remove(self.img))
        self.path = sh(["losetup", "--find", "--show", "--direct-io=on", self.img]).strip()
        self.name = os.path.basename(self.path)
        cleanup.push(f"detach {self.path}", lambda: sh(["losetup", "-d", self.path]))
        self.q = f"/sys/block/{self.name}/queue"
        if read(f"/sys/block/{self.name}/loop/backing_file") != self.img:
            raise BenchError(f"{self.path} is not backed by {self.img}; refusing to touch it")
        if read(f"/sys/block/{self.name}/loop/dio") != "1":
            log(f"warning: {self.path} has direct I/O off: the image's pages are cached twice")
        self.majmin = read(f"/sys/block/{self.name}/dev")
        sched0, self.ra0 = self.state()
        # A new loop device has no scheduler; a reused one keeps what its
        # last user left: the defaults' scheduler is not taken from it.
        self.default_sched = default_sched
        cleanup.push(f"put back {self.name}'s queue", lambda: self.set(sched0, self.ra0))
        if sched0 != default_sched:
            log(f"note: {self.name} came with scheduler {sched0} (left by its last user); "
                f"defaults taken as {default_sched}/{self.ra0}")
        self.offered = self.offered_schedulers()
        sh(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", self.path])
        os.makedirs(self.mnt, exist_ok=True)
        sh(["mount", "-o", "noatime", self.path, self.mnt])
        cleanup.push(f"unmount {self.mnt}", self.umount)

    def umount(self):
        if subprocess.run(["umount", self.mnt], stderr=subprocess.DEVNULL).returncode != 0:
            time.sleep(1)
            if subprocess.run(["umount", self.mnt], stderr=subprocess.DEVNULL).returncode != 0:
                sh(["umount", "-l", self.mnt])

    def offered_schedulers(self):
        # A scheduler built as a module is offered once loaded; a host
        # without kmod (modprobe) offers the built-in ones only.
        if shutil.which("modprobe"):
            for mod in ("mq-deadline", "kyber-iosched", "bfq"):
                subprocess.run(["modprobe", "-q", mod], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return read(f"{self.q}/scheduler").replace("[", "").replace("]", "").split()

    def state(self):
        s = read(f"{self.q}/scheduler")
        s = s[s.index("[") + 1:s.index("]")] if "[" in s else s
        return s, int(read(f"{self.q}/read_ahead_kb"))

    def set(self, sched, ra):
        write(f"{self.q}/scheduler", sched)
        write(f"{self.q}/read_ahead_kb", ra)
        got = self.state()
        if got != (sched, int(ra)):
            raise BenchError(f"{self.name}: set {sched}/{ra}, reads back {got[0]}/{got[1]}")

    def stat(self):
        """reads completed, sectors read, writes completed, sectors written"""
        f = read(f"/sys/block/{self.name}/stat").split()
        return [int(f[0]), int(f[2]), int(f[4]), int(f[6])]


# --- pods: memory-limited cgroups, and the device's throttle --------------------

class Pods:
    """Memory-limited cgroups ("pods"), v2 or v1, detected. The application
    pods sit under one parent that carries the cloud-volume-like cap on the
    device (v2 io.max; v1 blkio.throttle.*_device, hierarchical); the agent's
    pod is apart, with the chart's memory limit and no cap."""

    def __init__(self, tag, majmin, throttle, cleanup):
        self.cleanup = cleanup
        self.dirs = {}  # pod -> list of cgroup directories a process is put in
        self.made = []
        if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            self.version = 2
            root = "/sys/fs/cgroup"
            ctl = read(f"{root}/cgroup.subtree_control").split()
            for c in ("memory", "io"):
                if c not in ctl:
                    raise BenchError(f"the {c} controller is not enabled in {root}/cgroup.subtree_control "
                                     "(this benchmark does not change it)")
            self.app_parent = self._mkdir(f"{root}/{tag}")
            write(f"{self.app_parent}/cgroup.subtree_control", "+memory +io")
            caps = {"read_iops": "riops", "write_iops": "wiops", "read_bps": "rbps", "write_bps": "wbps"}
            line = " ".join(f"{caps[k]}={v or 'max'}" for k, v in sorted(throttle.items()))
            write(f"{self.app_parent}/io.max", f"{majmin} {line}")
            self.agent_parent = self._mkdir(f"{root}/{tag}-agent")
            write(f"{self.agent_parent}/cgroup.subtree_control", "+memory")
            self.throttle_where = f"{self.app_parent}/io.max"
        elif os.path.isdir("/sys/fs/cgroup/memory") and os.path.isdir("/sys/fs/cgroup/blkio"):
            self.version = 1
            own = {}
            for line in open("/proc/self/cgroup"):
                _, ctls, path = line.rstrip("\n").split(":", 2)
                for c in ctls.split(","):
                    own[c] = path
            mem = "/sys/fs/cgroup/memory" + own.get("memory", "/").rstrip("/")
            blk = "/sys/fs/cgroup/blkio" + own.get("blkio", "/").rstrip("/")
            self.mem_parent = self._mkdir(f"{mem}/{tag}")
            self.blk = self._mkdir(f"{blk}/{tag}")
            for k, f in (("read_iops", "read_iops_device"), ("write_iops", "write_iops_device"),
                         ("read_bps", "read_bps_device"), ("write_bps", "write_bps_device")):
                if throttle[k]:
                    write(f"{self.blk}/blkio.throttle.{f}", f"{majmin} {throttle[k]}")
            self.throttle_where = f"{self.blk}/blkio.throttle.*_device"
        else:
            raise BenchError("no memory cgroup: neither cgroup v2 (/sys/fs/cgroup/cgroup.controllers) "
                             "nor v1 memory and blkio hierarchies")

    def _mkdir(self, d):
        os.mkdir(d)
        self.made.append(d)
        self.cleanup.push(f"remove cgroup {d}", lambda: self._remove(d))
        return d

    def _remove(self, d):
        procs = f"{d}/cgroup.procs"
        for i in range(100):
            pids = [p for p in read(procs).split()] if os.path.exists(procs) else []
            if not pids:
                break
            if i == 0:
                log(f"SIGKILL to what is left in {d}: {' '.join(pids)}")
            for p in pids:
                try:
                    os.kill(int(p), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        os.rmdir(d)

    def pod(self, name, memory, agent=False):
        """Creates pod name with a memory limit; returns the cgroup.procs
        files a process of the pod is written to."""
        if self.version == 2:
            d = self._mkdir(f"{self.agent_parent if agent else self.app_parent}/{name}")
            write(f"{d}/memory.max", memory)
            try:
                write(f"{d}/memory.swap.max", 0)
            except OSError:
                pass
            files = [f"{d}/cgroup.procs"]
            self.dirs[name] = [d]
        else:
            d = self._mkdir(f"{self.mem_parent}/{name}")
            write(f"{d}/memory.limit_in_bytes", memory)
            files = [f"{d}/cgroup.procs"] + ([] if agent else [f"{self.blk}/cgroup.procs"])
            self.dirs[name] = [d]
        return files

    def procs(self, name):
        out = []
        for d in self.dirs.get(name, []):
            if os.path.exists(f"{d}/cgroup.procs"):
                out += [int(p) for p in read(f"{d}/cgroup.procs").split()]
        return out

    def memory_stat(self, name):
        """The pod's peak memory use, bytes (v2 memory.peak, v1 max_usage_in_bytes), or None."""
        d = self.dirs[name][0]
        for f in ("memory.peak", "memory.max_usage_in_bytes"):
            if os.path.exists(f"{d}/{f}"):
                try:
                    return int(read(f"{d}/{f}"))
                except (OSError, ValueError):
                    return None
        return None

    def kill(self, name, grace=5.0):
        """SIGTERM to every process of the pod, SIGKILL to those left after grace."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            pids = self.procs(name)
            if not pids:
                return
            for p in pids:
                try:
                    os.kill(p, sig)
                except ProcessLookupError:
                    pass
            t = time.monotonic()
            while self.procs(name) and time.monotonic() - t < wait:
                time.sleep(0.05)


def in_pod(files, cmd, user=None):
    """cmd (a list) wrapped so that it runs in the pod whose cgroup.procs
    files are given (the shell writes its own PID, then execs), as user."""
    if user:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", *cmd]
    script = "for f in " + " ".join(shlex.quote(f) for f in files) + \
        '; do echo $$ >"$f" || exit 125; done; exec "$@"'
    return ["sh", "-c", script, "sh", *cmd]


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def host_facts():
    def first(cmd):
        try:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()
        except OSError:
            return ""
    mem = 0
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) << 10
    model = ""
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    osr = ""
    if os.path.exists("/etc/os-release"):
        for line in open("/etc/os-release"):
            if line.startswith("PRETTY_NAME="):
                osr = line.split("=", 1)[1].strip().strip('"')
    return {
        "kernel": os.uname().release, "cpus": os.cpu_count(), "cpu_model": model,
        "memory_gib": round(mem / (1 << 30), 1), "os": osr, "hostname_hash": hash_host(),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "other_loop_devices": len([d for d in glob.glob("/sys/block/loop*/loop/backing_file")]),
        "versions": {
            "db_bench": first(["db_bench", "--version"]),
            "postgres": first(["/usr/lib/postgresql/15/bin/postgres", "--version"]),
            "rg": first(["rg", "--version"]).split("\n")[0],
            "go": first(["go", "env", "GOVERSION"]),
        },
    }


def hash_host():
    import hashlib
    return hashlib.sha256(os.uname().nodename.encode()).hexdigest()[:8]
