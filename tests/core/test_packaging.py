"""Packaging: the desktop launcher, icon and AppStream metadata are well formed, the install script puts
them where desktops look, and the wheel installs into a fresh virtual environment and runs."""

from __future__ import annotations

import configparser
import importlib.metadata
import importlib.util
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGING = REPO / "packaging"
DESKTOP = PACKAGING / "tunelab.desktop"
ICON = PACKAGING / "icons" / "tunelab.svg"
METAINFO = PACKAGING / "io.github.tunelab.Tunelab.metainfo.xml"
APP_ID = "io.github.tunelab.Tunelab"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def desktop_entry(path: Path) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",), strict=True)
    parser.optionxform = str  # desktop entry keys are case-sensitive
    parser.read_string(path.read_text(encoding="utf-8"), source=str(path))
    return parser["Desktop Entry"]


# ----------------------------------------------------------------------------------- the files


def test_desktop_entry_has_what_a_launcher_needs() -> None:
    entry = desktop_entry(DESKTOP)
    assert entry["Type"] == "Application"
    assert entry["Name"] == "tunelab"
    assert entry["Exec"] == "tunelab"  # the CLI without a command opens the GUI
    assert entry["Icon"] == ICON.stem
    assert entry["Terminal"] == "false"
    assert entry["Categories"].endswith(";")
    assert {"Development", "Science"} <= set(entry["Categories"].split(";"))
    assert entry["Comment"]
    scripts = PYPROJECT["project"]["scripts"]
    assert scripts.get("tunelab") == "tunelab.__main__:main"


def test_desktop_entry_passes_desktop_file_validate() -> None:
    validate = shutil.which("desktop-file-validate")
    if validate is None:
        pytest.skip("desktop-file-validate is not installed (apt-get install desktop-file-utils)")
    out = subprocess.run([validate, str(DESKTOP)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "error" not in out.stdout.lower()


def test_icon_is_a_scalable_svg() -> None:
    root = ET.parse(ICON).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert root.get("viewBox") == "0 0 128 128"
    assert root.get("width") == root.get("height") == "128"


def test_metainfo_describes_this_release() -> None:
    root = ET.parse(METAINFO).getroot()
    assert root.tag == "component" and root.get("type") == "desktop-application"
    assert root.findtext("id") == APP_ID
    assert root.findtext("metadata_license") == "CC0-1.0"
    assert root.findtext("project_license") == PYPROJECT["project"]["license"]  # an SPDX expression
    assert root.findtext("name") and root.findtext("summary")
    assert root.find("description/p") is not None
    assert root.findtext("launchable[@type='desktop-id']") == DESKTOP.name
    assert root.findtext("provides/binary") == "tunelab"
    releases = [r.get("version") for r in root.findall("releases/release")]
    assert releases[0] == PYPROJECT["project"]["version"]  # newest first
    assert root.find("content_rating") is not None


def test_metainfo_passes_appstreamcli_validate() -> None:
    appstreamcli = shutil.which("appstreamcli")
    if appstreamcli is None:
        pytest.skip("appstreamcli is not installed (apt-get install appstream)")
    out = subprocess.run(
        [appstreamcli, "validate", "--no-net", str(METAINFO)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_pyproject_ships_the_desktop_files() -> None:
    data_files = PYPROJECT["tool"]["setuptools"]["data-files"]
    shipped = {Path(f) for files in data_files.values() for f in files}
    assert {p.relative_to(REPO) for p in (DESKTOP, ICON, METAINFO)} <= shipped
    # The app's icons and stylesheet travel too (share/tunelab/resources), every one of them.
    resources = {p.relative_to(REPO) for p in (REPO / "resources").rglob("*") if p.is_file()}
    assert resources <= shipped


# ----------------------------------------------------------------------------------- install-desktop.sh


def test_install_desktop_script_installs_and_removes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {**os.environ, "XDG_DATA_HOME": str(data), "HOME": str(tmp_path)}
    script = str(PACKAGING / "install-desktop.sh")
    sh = shutil.which("sh") or "/bin/sh"
    program = "/opt/my venv/bin/tunelab"
    out = subprocess.run([sh, script, "--exec", program], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr

    installed = data / "applications" / DESKTOP.name
    assert desktop_entry(installed)["Exec"] == f'"{program}"'  # quoted: the path has a space
    assert (data / "icons/hicolor/scalable/apps" / ICON.name).read_bytes() == ICON.read_bytes()
    assert (data / "metainfo" / METAINFO.name).read_bytes() == METAINFO.read_bytes()
    assert {k: v for k, v in desktop_entry(installed).items() if k != "Exec"} == {
        k: v for k, v in desktop_entry(DESKTOP).items() if k != "Exec"
    }

    bad = subprocess.run(
        [sh, script, "--exec", "/opt/$HOME/tunelab"], env=env, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "refusing" in bad.stderr

    out = subprocess.run([sh, script, "--uninstall"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert not installed.exists()
    assert not (data / "metainfo" / METAINFO.name).exists()


# ----------------------------------------------------------------------------------- the wheel

_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "out", "*.sqlite"
)


def _setuptools_major() -> int:
    try:
        return int(importlib.metadata.version("setuptools").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return 0


def _build_wheel(src: Path, out: Path) -> Path:
    # Offline when this environment can build (wheel, and a setuptools that reads pyproject.toml's SPDX
    # license: 77 or later, where a fresh Python 3.11 venv has 65); else pip's isolated build, which
    # downloads the build requirements.
    offline = importlib.util.find_spec("wheel") is not None and _setuptools_major() >= 77
    cmd = [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(out)]
    if offline:
        cmd.append("--no-build-isolation")
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = out.glob("tunelab-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding tunelab's wheel and nothing else of its own; the heavy
    dependencies (TVM, Qt) come from this environment's site-packages, so nothing is downloaded."""
    root = tmp_path_factory.mktemp("packaging")
    src = root / "src"
    shutil.copytree(REPO, src, ignore=_NOT_SOURCE)  # build from a copy: the checkout stays untouched
    wheel = _build_wheel(src, root / "dist")

    venv = root / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
        timeout=120,
    )
    python = venv / "bin" / "python"
    venv_site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # --system-site-packages reaches the base interpreter only; when these tests run inside a virtual
    # environment, its site-packages (TVM, PySide6, pip) are added after the new venv's own. Its .pth
    # files (our editable install's finder among them) are not run from there.
    parents = [p for p in [*site.getsitepackages(), sysconfig.get_paths()["purelib"]] if Path(p).is_dir()]
    (venv_site / "_tunelab_test_parent_env.pth").write_text("\n".join(dict.fromkeys(parents)) + "\n")
    # --ignore-installed: never touch the tunelab installed in this environment.
    result = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return venv


def _run_in(venv: Path, *args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        list(args), capture_output=True, text=True, cwd=venv, env=env, timeout=300, **kwargs
    )


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv(installed_venv: Path) -> None:
    code = (
        "import importlib, importlib.util; "
        "print(*(importlib.import_module(n).__file__ for n in ('tunelab', 'tunelab.core', 'tunelab.app', "
        "'tunelab.core.cli.main', 'tunelab.app.main')), sep='\\n'); "
        "print('generic:', [n for n in ('core', 'app') if importlib.util.find_spec(n) is not None])"
    )
    out = _run_in(installed_venv, str(installed_venv / "bin" / "python"), "-c", code)
    assert out.returncode == 0, out.stderr
    *paths, generic = out.stdout.strip().splitlines()
    for path in paths:
        assert Path(path).is_relative_to(installed_venv), f"imported from outside the venv: {path}"
    assert generic == "generic: []", "the wheel must not install top-level packages named core or app"
    site_dir = Path(paths[0]).parents[1]
    assert not (site_dir / "core").exists() and not (site_dir / "app").exists()
    for shipped in ("applications/tunelab.desktop", "icons/hicolor/scalable/apps/tunelab.svg"):
        assert (installed_venv / "share" / shipped).is_file()
    assert (installed_venv / "share/metainfo" / METAINFO.name).is_file()
    assert (installed_venv / "bin" / "tunelab").is_file()


@pytest.mark.slow
def test_installed_tunelab_command_runs(installed_venv: Path) -> None:
    out = _run_in(installed_venv, str(installed_venv / "bin" / "tunelab"), "--help")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "usage: tunelab" in out.stdout
    out = _run_in(installed_venv, str(installed_venv / "bin" / "python"), "-m", "tunelab", "workloads")
    assert out.returncode == 0 and "gemm" in out.stdout, out.stdout + out.stderr


def test_every_package_folder_is_installed() -> None:
    """A new subpackage under core/ or app/ must be listed in pyproject's packages, or the wheel lacks it."""
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    folders = {"tunelab"} | {
        "tunelab." + ".".join(init.parent.relative_to(REPO).parts)
        for top in ("core", "app")
        for init in (REPO / top).rglob("__init__.py")
    }
    assert folders == listed
