"""scripts/setup.sh and its package names (scripts/lib/os_packages.sh) on other releases: os-release
files of Debian 12 and 13, Ubuntu 24.04, Linux Mint and Fedora, with fake dpkg-query / apt-cache /
apt-get / sudo / id on PATH, so nothing is installed and every command setup would run is recorded.

Run by ctest (label unit) with the venv python, like test_prepare_data.py.
"""
import os
import stat
import subprocess
import tempfile
import textwrap
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LIB = os.path.join(REPO, "scripts", "lib", "os_packages.sh")
SETUP = os.path.join(REPO, "scripts", "setup.sh")

RELEASES = {
    "debian12": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n',
    "debian13": 'ID=debian\nVERSION_ID="13"\nVERSION_CODENAME=trixie\n',
    "ubuntu2404": 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\nVERSION_CODENAME=noble\n'
                  'UBUNTU_CODENAME=noble\n',
    "mint22": 'NAME="Linux Mint"\nID=linuxmint\nID_LIKE="ubuntu debian"\nVERSION_ID="22"\nVERSION_CODENAME=wilma\n'
              'UBUNTU_CODENAME=noble\n',
    "fedora41": 'NAME="Fedora Linux"\nID=fedora\nVERSION_ID=41\n',
}


def script(path, body):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + textwrap.dedent(body))
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)


class FakeSystem:
    """A temporary bin/ of fake package tools, ahead of the real ones on PATH. `installed` maps a
    package to its version; `candidate` is apt's python3 candidate ("" = package lists empty)."""

    def __init__(self, root, release, installed=None, candidate="", uid=0):
        self.root = root
        self.bin = os.path.join(root, "bin")
        self.log = os.path.join(root, "calls.log")
        os.makedirs(self.bin)
        self.os_release = os.path.join(root, "os-release")
        with open(self.os_release, "w") as f:
            f.write(RELEASES[release])
        installed = installed or {}
        cases = "".join(f'  {p}) echo "{"install ok installed" if v else ""}";;\n' for p, v in installed.items())
        versions = "".join(f'  {p}) echo "{v}"; exit 0;;\n' for p, v in installed.items() if v)
        script(os.path.join(self.bin, "dpkg-query"), f"""\
            pkg=$(eval echo \\${{$#}})
            case "$*" in *'{{Status}}'*) case "$pkg" in
            {cases}  *) exit 1;; esac; exit 0;; esac
            case "$pkg" in
            {versions}  *) exit 1;; esac
            """)
        policy = f"  Candidate: {candidate}" if candidate else "  Candidate: (none)"
        script(os.path.join(self.bin, "apt-cache"), f'echo "python3:"; echo "  Installed: (none)"; echo "{policy}"\n')
        script(os.path.join(self.bin, "apt-get"), f'echo "apt-get $*" >> {self.log}\n')
        script(os.path.join(self.bin, "sudo"), f'echo "sudo $*" >> {self.log}\nexec "$@"\n')
        script(os.path.join(self.bin, "id"), f'echo {uid}\n')
        # A Python environment that "has" every module and answers torch's cmake prefix.
        self.venv = os.path.join(root, "venv")
        os.makedirs(os.path.join(self.venv, "bin"))
        script(os.path.join(self.venv, "bin", "python"), f"""\
            echo "python $*" >> {self.log}
            case "$*" in *cmake_prefix_path*) echo /fake/torch/share/cmake;; esac
            exit 0
            """)

    def env(self, **extra):
        env = dict(os.environ, PATH=self.bin + ":/usr/bin:/bin", ATTNLAB_OS_RELEASE=self.os_release,
                   HOME=self.root, ATTNLAB_CACHE=os.path.join(self.root, "cache"))
        env.pop("ATTNLAB_VENV", None)
        env.pop("ATTNLAB_SKIP_SETUP", None)
        env.update(extra)
        return env

    def bash(self, code, **extra):
        return subprocess.run(["bash", "-c", code], env=self.env(**extra), capture_output=True, text=True,
                              cwd=REPO, timeout=60)

    def calls(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return f.read().splitlines()


def doc_package(system):
    r = system.bash(f'source {LIB}; attnlab_read_os_release; attnlab_python_doc_package')
    return r.stdout.strip() if r.returncode == 0 else None


class PackageNames(unittest.TestCase):
    def fake(self, release, **kwargs):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        return FakeSystem(tmp.name, release, **kwargs)

    def test_the_installed_python3_decides_the_doc_package(self):
        self.assertEqual(doc_package(self.fake("debian12", installed={"python3": "3.11.2-1+b1"})), "python3.11-doc")

    def test_apt_candidate_when_python3_is_not_installed(self):
        self.assertEqual(doc_package(self.fake("ubuntu2404", candidate="3.12.3-0ubuntu2")), "python3.12-doc")

    def test_the_release_when_package_lists_are_empty(self):
        self.assertEqual(doc_package(self.fake("debian13")), "python3.13-doc")
        self.assertEqual(doc_package(self.fake("ubuntu2404")), "python3.12-doc")
        self.assertEqual(doc_package(self.fake("debian12")), "python3.11-doc")
        self.assertEqual(doc_package(self.fake("mint22")), "python3.12-doc")  # its UBUNTU_CODENAME, noble
        self.assertIsNone(doc_package(self.fake("fedora41")))

    def test_debian_family(self):
        for release, like in [("debian12", True), ("ubuntu2404", True), ("mint22", True), ("fedora41", False)]:
            r = self.fake(release).bash(f'source {LIB}; attnlab_read_os_release; attnlab_is_debian_like')
            self.assertEqual(r.returncode == 0, like, release)

    def test_the_newest_installed_doc_sources(self):
        with tempfile.TemporaryDirectory() as root:
            for v in ("3.9", "3.11", "3.13"):
                os.makedirs(os.path.join(root, f"python{v}-doc", "html", "_sources"))
            r = subprocess.run(["bash", "-c", f'source {LIB}; attnlab_python_doc_sources {root}'],
                               capture_output=True, text=True)
            self.assertEqual(r.stdout.strip(), os.path.join(root, "python3.13-doc", "html", "_sources"))
            r = subprocess.run(["bash", "-c", f'source {LIB}; attnlab_python_doc_sources {root}/none'],
                               capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0)


class Setup(unittest.TestCase):
    def fake(self, release, **kwargs):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        return FakeSystem(tmp.name, release, **kwargs)

    ALL = {p: "1" for p in ["cmake", "ninja-build", "ccache", "g++", "python3-venv", "libyaml-cpp-dev",
                            "libspdlog-dev", "libfmt-dev", "libcli11-dev", "nlohmann-json3-dev", "libgtest-dev",
                            "libssl-dev", "libboost-dev", "libgloo-dev", "python3.12-doc"]}

    def test_nothing_missing_needs_no_sudo_and_no_apt(self):
        s = self.fake("ubuntu2404", installed=dict(self.ALL, python3="3.12.3-0ubuntu2"), uid=1000)
        r = s.bash(f"source {SETUP} && echo TORCH=$Torch_DIR", ATTNLAB_VENV=s.venv)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("TORCH=/fake/torch/share/cmake/Torch", r.stdout)
        self.assertFalse([c for c in s.calls() if c.startswith(("sudo", "apt-get"))], s.calls())

    def test_missing_packages_install_through_sudo_env_noninteractive(self):
        installed = dict(self.ALL, python3="3.12.3-0ubuntu2")
        del installed["libboost-dev"], installed["python3.12-doc"]
        s = self.fake("ubuntu2404", installed=installed, uid=1000)
        r = s.bash(f"source {SETUP}", ATTNLAB_VENV=s.venv)
        self.assertEqual(r.returncode, 0, r.stderr)
        calls = s.calls()
        self.assertIn("sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq", calls)
        install = [c for c in calls if c.startswith("sudo env DEBIAN_FRONTEND=noninteractive apt-get install")]
        self.assertEqual(len(install), 1, calls)
        self.assertIn("libboost-dev", install[0])
        self.assertIn("python3.12-doc", install[0])
        self.assertNotIn("cmake", install[0])

    def test_skip_setup_installs_nothing(self):
        s = self.fake("debian12", uid=1000)  # nothing installed at all
        r = s.bash(f"source {SETUP} && echo OK", ATTNLAB_VENV=s.venv, ATTNLAB_SKIP_SETUP="1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("OK", r.stdout)
        self.assertFalse([c for c in s.calls() if c.startswith(("sudo", "apt-get")) or "pip install" in c], s.calls())

    def test_a_foreign_venv_without_torch_is_refused_and_untouched(self):
        s = self.fake("debian12", installed=dict(self.ALL, python3="3.11.2-1+b1", **{"python3.11-doc": "1"}))
        script(os.path.join(s.venv, "bin", "python"), f'echo "python $*" >> {s.log}\nexit 1\n')  # no torch
        before = sorted(os.listdir(s.venv))
        r = s.bash(f"source {SETUP}", ATTNLAB_VENV=s.venv)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("has no torch==2.11.0", r.stderr)
        self.assertIn("Nothing was changed".lower(), r.stderr.lower())
        self.assertEqual(sorted(os.listdir(s.venv)), before)
        self.assertFalse([c for c in s.calls() if "pip install" in c or "-m venv" in c], s.calls())

    def test_not_debian_is_a_clear_error(self):
        s = self.fake("fedora41")
        r = s.bash(f"source {SETUP}", ATTNLAB_VENV=s.venv)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("not Debian or Ubuntu (fedora)", r.stderr)
        self.assertIn("ATTNLAB_SKIP_SETUP=1", r.stderr)


if __name__ == "__main__":
    unittest.main()
