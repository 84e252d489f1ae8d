"""scripts/images/venv_layer.py: the node image's packages taken from the project venv as one
tar for `docker import`. Run here on a small base tar and a small requirement (rq), against this
venv's real installed files; the e2e suite builds the real image with it."""

import io
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SITE_IN_IMAGE = f"opt/venv/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
SITE = Path(sysconfig.get_paths()["purelib"])


def base_tar() -> bytes:
    """A root filesystem with a file of its own and a stale rq module the venv's must replace."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("etc/hostname", b"base\n"), (f"{SITE_IN_IMAGE}/rq/__init__.py", b"STALE = True\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def run_layer(tmp_path: Path, requirement: str) -> subprocess.CompletedProcess:
    reqs = tmp_path / "requirements.txt"
    reqs.write_text(f"# a comment\n{requirement}  # trailing\n\n")
    return subprocess.run([sys.executable, ROOT / "scripts/images/venv_layer.py", reqs], input=base_tar(),
                          capture_output=True, timeout=300)


def layer(tmp_path: Path, requirement: str) -> tuple[tarfile.TarFile, subprocess.CompletedProcess]:
    out = run_layer(tmp_path, requirement)
    assert out.returncode == 0, out.stderr.decode()
    return tarfile.open(fileobj=io.BytesIO(out.stdout)), out


def test_the_layer_holds_the_requirement_and_its_dependencies_once_each(tmp_path):
    tar, out = layer(tmp_path, "rq")
    names = tar.getnames()
    assert len(names) == len(set(names)), "docker import refuses a path given twice"
    assert tar.extractfile("etc/hostname").read() == b"base\n"
    rq_init = tar.extractfile(f"{SITE_IN_IMAGE}/rq/__init__.py").read()
    assert rq_init == (SITE / "rq/__init__.py").read_bytes()  # the venv's file replaced the base's
    pyc = f"rq/__pycache__/__init__.{sys.implementation.cache_tag}.pyc"
    assert (f"{SITE_IN_IMAGE}/{pyc}" in names) == (SITE / pyc).exists()
    # rq's dependencies (redis, click) and pip come along; what rq does not need stays out.
    tops = {n.split("/")[5] for n in names if n.startswith(SITE_IN_IMAGE + "/") and n.count("/") > 5}
    assert {"rq", "redis", "click", "pip"} <= tops
    assert not tops & {"torch", "ansible", "minihpc", "pytest"}
    assert any(t.startswith("rq-") and t.endswith(".dist-info") for t in tops)
    assert b"packages" in out.stderr and b"files" in out.stderr


def test_files_belong_to_root_and_everyone_can_read_them(tmp_path):
    tar, _ = layer(tmp_path, "rq")
    added = [m for m in tar.getmembers() if m.name.startswith(SITE_IN_IMAGE + "/")]
    assert added and all(m.uid == 0 and m.gid == 0 for m in added)
    assert all(m.mode & 0o444 == 0o444 for m in added if m.isreg())
    assert all(m.mode & 0o555 == 0o555 for m in added if m.isdir())


def test_console_scripts_run_with_the_images_python(tmp_path):
    """Each entry point gets a script for /opt/venv/bin; run here with this Python, rq's works."""
    tar, _ = layer(tmp_path, "rq")
    script = tar.extractfile("opt/venv/bin/rq").read().decode()
    assert script.startswith("#!/opt/venv/bin/python3\n")
    assert tar.getmember("opt/venv/bin/rq").mode == 0o755
    path = tmp_path / "rq"
    path.write_text(script)
    ran = subprocess.run([sys.executable, path, "--help"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and "Usage:" in ran.stdout, ran.stderr


def test_a_requirement_that_is_not_installed_is_named(tmp_path):
    out = run_layer(tmp_path, "no-such-package-here")
    assert out.returncode == 1
    assert out.stderr.decode().strip().splitlines()[-1].startswith("venv_layer: no-such-package-here is not installed")
