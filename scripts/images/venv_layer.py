"""Stream an image's root filesystem with the packages of a venv added, for `docker import`.

    venv_layer.py REQUIREMENTS... < rootfs.tar > rootfs+packages.tar
    venv_layer.py --compile REQUIREMENTS...   compile those packages' bytecode in the venv

Run with the project venv's Python (scripts/build-images.sh does). It copies the tar on stdin
(`docker export` of the node base image, which has an empty venv at /opt/venv) and adds, under
/opt/venv/lib/pythonX.Y/site-packages, every installed file of the distributions REQUIREMENTS
name and of everything they depend on (their RECORD files, with the bytecode compiled beside
them), plus a console script in /opt/venv/bin for each entry point. The venv's Ansible, linters
and test tools stay out, as does minihpc itself (the image copies its source tree).

``--compile`` (scripts/venv.sh) compiles the bytecode of just those packages, on every core:
the image needs it (its site-packages are root's, so a job could never cache a module's
bytecode and would compile torch's again at every start), the venv's test tools, linters and
Ansible (more than half of its modules) compile when first imported, if ever.

Why: the packages are already unpacked and compiled in the venv. Installing them again inside a
`docker build` took 3 of the build's 6 minutes here (pip unpacking 3 GB of wheels, then the
storage driver copying the 6 GB layer twice to commit it); `docker import` writes it once. The
image's Python must be the venv's version (the caller checks): bytecode and compiled modules
are per minor version.
"""

from __future__ import annotations

import io
import py_compile
import re
import sys
import sysconfig
import tarfile
import time
from concurrent.futures import ProcessPoolExecutor
from importlib import metadata
from pathlib import Path, PurePosixPath

from packaging.requirements import Requirement

PREFIX = PurePosixPath("opt/venv")
SITE = PREFIX / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
PYC_TAG = sys.implementation.cache_tag


def requirement_names(paths: list[str]) -> list[Requirement]:
    """The requirements in pip requirement files (comments, options and blank lines skipped)."""
    found = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line and not line.startswith("-"):
                found.append(Requirement(line))
    return found


def closure(roots: list[Requirement]) -> list[metadata.Distribution]:
    """The installed distributions ROOTS need, with their dependencies, as pip resolved them here."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [(req, frozenset(req.extras)) for req in roots]
    while todo:
        req, extras = todo.pop()
        key = re.sub(r"[-_.]+", "-", req.name).lower()
        if key in seen:
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            sys.exit(f"venv_layer: {req.name} is not installed in {sys.prefix}; run make venv")
        seen[key] = dist
        wanted = [{"extra": e} for e in extras] or [{"extra": ""}]
        for dep in map(Requirement, dist.requires or []):
            if dep.marker is None or any(dep.marker.evaluate(env) for env in wanted):
                todo.append((dep, frozenset(dep.extras)))
    return sorted(seen.values(), key=lambda d: d.metadata["Name"].lower())


def installed_files(dist: metadata.Distribution, site: Path) -> set[PurePosixPath]:
    """DIST's files inside site-packages (RECORD's), with each module's compiled bytecode."""
    files = set()
    for entry in dist.files or []:
        rel = PurePosixPath(entry)
        if rel.parts[0] == "..":  # scripts and data outside site-packages: console scripts are remade
            continue
        files.add(rel)
        if rel.suffix == ".py":
            pyc = rel.parent / "__pycache__" / f"{rel.stem}.{PYC_TAG}.pyc"
            if (site / pyc).exists():
                files.add(pyc)
    return files


def console_script(group_value: str) -> bytes:
    module, _, attr = group_value.partition(":")
    call = attr.strip() or "main"
    head, _, rest = call.partition(".")
    target = f"{head}.{rest}" if rest else head
    return (f"#!/{PREFIX}/bin/python3\nimport sys\nfrom {module.strip()} import {head}\n"
            f"if __name__ == '__main__':\n    sys.exit({target}())\n").encode()


def add_bytes(out: tarfile.TarFile, name: PurePosixPath, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(str(name))
    info.size, info.mode, info.mtime = len(data), mode, int(time.time())
    out.addfile(info, io.BytesIO(data))


def copy_base(base: tarfile.TarFile, out: tarfile.TarFile, replaced: set[str]) -> None:
    """Copy BASE's members into OUT, but those named in REPLACED (docker import refuses a path
    given twice; the venv's version wins)."""
    for member in base:
        if member.name.rstrip("/") not in replaced:
            out.addfile(member, base.extractfile(member) if member.isreg() else None)


def tar_infos(out: tarfile.TarFile, site: Path, files: set[PurePosixPath],
              dirs: set[PurePosixPath]) -> list[tuple[Path, tarfile.TarInfo]]:
    """Each of DIRS and FILES (relative to SITE) with its tar header under the image's
    site-packages, folders first, read once (their sizes also give the progress its total)."""
    infos = []
    for rel in sorted(dirs) + sorted(files):
        info = out.gettarinfo(str(site / rel), arcname=str(SITE / rel))
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mode |= 0o444 if info.isreg() else 0o555  # every user reads packages; nobody writes them
        infos.append((site / rel, info))
    return infos


def add_tree(out: tarfile.TarFile, infos: list[tuple[Path, tarfile.TarInfo]], progress: Progress) -> None:
    for source, info in infos:
        if info.isreg():
            with open(source, "rb") as data:
                out.addfile(info, data)
            progress.done(info.size)
        else:
            out.addfile(info)


class Progress:
    """One line every few seconds on stderr: how much of the packages is written so far."""

    def __init__(self, total: int, every: float = 5.0):
        self.total, self.every, self.written = total, every, 0
        self.start = self.last = time.monotonic()

    def done(self, size: int) -> None:
        self.written += size
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            rate = self.written / (now - self.start) / 1e6
            print(f"    {self.written / 1e9:.1f} of {self.total / 1e9:.1f} GB, {rate:.0f} MB/s", file=sys.stderr, flush=True)


def write(dists: list[metadata.Distribution], site: Path, base: tarfile.TarFile, out: tarfile.TarFile) -> tuple[int, int]:
    """Copy BASE into OUT, then add DISTS' files and console scripts; (files, bytes) added."""
    files = set().union(*(installed_files(d, site) for d in dists))
    scripts = {PREFIX / "bin" / ep.name: ep.value for d in dists for ep in d.entry_points.select(group="console_scripts")}
    dirs = {parent for f in files for parent in f.parents if parent != PurePosixPath(".")}
    copy_base(base, out, {str(SITE / f) for f in files | dirs} | set(map(str, scripts)))
    infos = tar_infos(out, site, files, dirs)
    progress = Progress(sum(info.size for _, info in infos if info.isreg()))
    add_tree(out, infos, progress)
    for path, value in scripts.items():
        add_bytes(out, path, console_script(value), 0o755)
    return len(infos), progress.written


def _compile(path: str) -> int:
    try:
        py_compile.compile(path, doraise=True)
    except (py_compile.PyCompileError, OSError, ValueError):
        return 0  # what cannot compile (a test file for another Python, say) stays source
    return 1


def compile_closure(dists: list[metadata.Distribution], site: Path) -> tuple[int, int]:
    """Compile the bytecode of DISTS' modules, on every core: (compiled, modules)."""
    sources = sorted(str(site / f) for d in dists for f in map(PurePosixPath, d.files or [])
                     if f.suffix == ".py" and f.parts[0] != "..")
    with ProcessPoolExecutor() as pool:
        return sum(pool.map(_compile, sources, chunksize=64)), len(sources)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    site = Path(sysconfig.get_paths()["purelib"])
    if argv[0] == "--compile":
        start = time.monotonic()
        done, total = compile_closure(closure(requirement_names(argv[1:])), site)
        print(f"    bytecode of a node's packages: {done} of {total} modules in {time.monotonic() - start:.0f}s",
              file=sys.stderr)
        return 0
    # pip too, as a venv made with it would have: the image's venv is made without it.
    dists = closure(requirement_names(argv) + [Requirement("pip")])
    start = time.monotonic()
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as base, \
            tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT) as out:
        count, size = write(dists, site, base, out)
    print(f"    {len(dists)} packages, {count} files, {size / 1e9:.2f} GB from {sys.prefix} "
          f"in {time.monotonic() - start:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
