"""A PEP 517 build backend for ``pip install ./python``, with nothing to download: it builds the extension module
``_lcsim`` with the repository's CMake build and packs it, with ``lcsim/__init__.py``, into a wheel for the
interpreter that runs pip (a venv's included).

Which build: ``LCSIM_BUILD_DIR`` when set, else the repository's ``build/`` (what ``tools/setup.sh`` configures),
when its ``_lcsim`` is for this interpreter's ABI (the suffix ``sysconfig`` gives, e.g. ``.cpython-311-x86_64-linux-
gnu.so``); otherwise ``build/python-<ABI>``, configured for this interpreter (``-DPython_EXECUTABLE``). Only the
target ``_lcsim`` is built (``CMAKE_BUILD_PARALLEL_LEVEL`` jobs, default 2). Needs CMake, a C++ compiler, pybind11
and this interpreter's headers: Debian's ``tools/setup.sh`` installs them for ``/usr/bin/python3``.
"""
import base64
import hashlib
import os
import re
import subprocess
import sys
import sysconfig
import zipfile

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(PYTHON_DIR)
NAME = "lcsim"


def _version():
    with open(os.path.join(REPO, "CMakeLists.txt"), encoding="utf-8") as f:
        match = re.search(r"project\(lcsim VERSION ([0-9.]+)", f.read())
    if not match:
        raise RuntimeError(f"{REPO}/CMakeLists.txt: no `project(lcsim VERSION x.y.z)`")
    return match.group(1)


def _run(command):
    print("lcsim build backend: " + " ".join(command), file=sys.stderr, flush=True)
    subprocess.run(command, check=True, stdout=sys.stderr)


def _extension(build_dir):
    return os.path.join(build_dir, "python", NAME, "_lcsim" + sysconfig.get_config_var("EXT_SUFFIX"))


def _build_extension():
    """The path of ``_lcsim`` built for this interpreter."""
    jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")
    build_dir = os.environ.get("LCSIM_BUILD_DIR") or os.path.join(REPO, "build")
    if os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        _run(["cmake", "--build", build_dir, "--target", "_lcsim", "-j", jobs])
        if os.path.exists(_extension(build_dir)):
            return _extension(build_dir)
    # No build, or one for another interpreter: a build of the module alone for this one.
    own = os.path.join(REPO, "build", "python-" + sysconfig.get_config_var("SOABI"))
    _run(["cmake", "-S", REPO, "-B", own, "-DCMAKE_BUILD_TYPE=Release", "-DPython_EXECUTABLE=" + sys.executable,
          "-DLCSIM_WITH_CUDA=OFF"])
    _run(["cmake", "--build", own, "--target", "_lcsim", "-j", jobs])
    if not os.path.exists(_extension(own)):
        raise RuntimeError(f"{_extension(own)} was not built: is pybind11 (Debian: pybind11-dev) installed, and "
                           f"the headers of {sys.executable} (python3-dev)?")
    return _extension(own)


def _tag():
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{python}-{python}-{platform}"


def _metadata(version):
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\n"
            "Summary: Compare data-scheduling policies for long-context LLM fine-tuning (the lcsim engine)\n"
            "Requires-Python: >=3.11\nProvides-Extra: pandas\nRequires-Dist: pandas; extra == \"pandas\"\n")


def _dist_info(version):
    return f"{NAME}-{version}.dist-info"


def _write_metadata(directory, version):
    info = os.path.join(directory, _dist_info(version))
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata(version))
    return _dist_info(version)


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _write_metadata(metadata_directory, _version())


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    extension = _build_extension()
    files = {f"{NAME}/__init__.py": open(os.path.join(PYTHON_DIR, NAME, "__init__.py"), "rb").read(),
             f"{NAME}/{os.path.basename(extension)}": open(extension, "rb").read()}
    info = _dist_info(version)
    files[f"{info}/METADATA"] = _metadata(version).encode()
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: lcsim_build_backend\nRoot-Is-Purelib: false\n"
                              f"Tag: {_tag()}\n").encode()
    files[f"{info}/top_level.txt"] = f"{NAME}\n".encode()
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = f"{NAME}-{version}-{_tag()}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            entry = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = (0o755 if path.endswith(".so") else 0o644) << 16
            z.writestr(entry, data, zipfile.ZIP_DEFLATED)
    return wheel
