"""A one-node Slurm cluster on localhost for tests: munged, slurmctld and slurmd from Debian's
slurm-wlm and munge packages, each with its own key, socket, ports, state and logs in a temporary
directory, so it touches no system-wide Slurm or munge. Needs root (slurmd starts jobs as their user).

    with SlurmCluster() as cluster:
        job = cluster.sbatch(script)
        cluster.state(f"{job}_0")            # "RUNNING", "CANCELLED", ...

Requeued jobs wait cred_expire + 1 seconds before they start again (slurmctld's rule; 121 s by
default), then for the next pass of the scheduler (every 60 s by default): the cluster sets
cred_expire to 5 s and sched_interval to 2 s, so a requeued task starts again within seconds.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

DAEMONS = ("munged", "slurmctld", "slurmd")
CRED_EXPIRE_S = 5


def missing() -> str | None:
    """Why no cluster can be started here, or None."""
    for daemon in DAEMONS:
        if not (shutil.which(daemon) or os.path.exists(f"/usr/sbin/{daemon}")):
            return f"{daemon} is not installed (apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "the test cluster's slurmd must run as root"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def daemon(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


class SlurmCluster:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="attnlab-slurm-")
        os.chmod(self.dir, 0o755)  # munged wants its socket's directory searchable by all
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.node = "attnlab0"

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def __enter__(self) -> "SlurmCluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        for sub in ("state", "spool", "log"):
            os.makedirs(self.path(sub))
        with open(self.path("munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(self.path("munge.key"), 0o400)
        subprocess.run([daemon("munged"), f"--key-file={self.path('munge.key')}", f"--socket={self.path('munge.sock')}",
                        f"--pid-file={self.path('munged.pid')}", f"--log-file={self.path('log/munged.log')}",
                        f"--seed-file={self.path('munge.seed')}", "--force"], check=True, env=self.env)
        self.write_conf()
        subprocess.run([daemon("slurmctld"), "-f", self.conf], check=True, env=self.env)
        subprocess.run([daemon("slurmd"), "-f", self.conf, "-N", self.node], check=True, env=self.env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = self.run(["sinfo", "-h", "-n", self.node, "-o", "%T"], check=False)
            if out.strip() == "idle":
                return
            time.sleep(0.5)
        raise RuntimeError(f"the test cluster's node never became idle:\n{self.logs()}")

    def write_conf(self) -> None:
        host = socket.gethostname().split(".")[0]
        cpus = len(os.sched_getaffinity(0))
        text = f"""ClusterName=attnlabtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.path('munge.sock')},cred_expire={CRED_EXPIRE_S}
StateSaveLocation={self.path('state')}
SlurmdSpoolDir={self.path('spool')}
SlurmctldPidFile={self.path('slurmctld.pid')}
SlurmdPidFile={self.path('slurmd.pid')}
SlurmctldLogFile={self.path('log/slurmctld.log')}
SlurmdLogFile={self.path('log/slurmd.log')}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
KillWait=30
MinJobAge=3600
ReturnToService=2
NodeName={self.node} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
"""
        with open(self.conf, "w") as f:
            f.write(text)

    def stop(self) -> None:
        """Ends the jobs, then the daemons this cluster started (by their pid files), and removes it."""
        if os.path.exists(self.path("slurmctld.pid")):
            self.run(["scancel", "--full", "--signal=KILL", "--user", "root"], check=False)
        for name in ("slurmd", "slurmctld", "munged"):
            pid_file = self.path(f"{name}.pid")
            try:
                with open(pid_file) as f:
                    pid = int(f.read().strip())
                os.kill(pid, signal.SIGTERM)
                for _ in range(100):
                    os.kill(pid, 0)
                    time.sleep(0.1)
            except (OSError, ValueError):
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, argv: list[str], check: bool = True) -> str:
        proc = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=60)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {proc.stderr.strip()}")
        return proc.stdout

    def sbatch(self, script: str) -> str:
        out = self.run(["sbatch", "--parsable", script])
        return out.strip().split(";")[0]

    def job(self, job_id: str) -> dict:
        """`scontrol show job`'s fields of one job (or array task, "<job>_<task>")."""
        out = self.run(["scontrol", "show", "job", "-o", job_id], check=False)
        return dict(re.findall(r"(\w+)=(\S*)", out))

    def state(self, job_id: str) -> str:
        return self.job(job_id).get("JobState", "?")

    def wait_for(self, what, timeout: float, every: float = 0.5, message: str = ""):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = what()
            if got:
                return got
            time.sleep(every)
        raise AssertionError(f"timed out after {timeout:.0f} s: {message}\n{self.logs()}")

    def logs(self) -> str:
        out = []
        for name in ("slurmctld", "slurmd"):
            try:
                with open(self.path(f"log/{name}.log"), errors="replace") as f:
                    out.append(f"--- {name}.log (end)\n" + "".join(f.readlines()[-15:]))
            except OSError:
                pass
        return "\n".join(out)
