"""Checks the installed TensorFlow / TF-Text / Keras against the tested matrix.

A TensorFlow and TF-Text pair built for different releases does not fail with a
readable message: it fails with `undefined symbol` while loading `_*_ops.so`, or
with "Op type not registered" much later, inside a SavedModel load. So this
check runs before TensorFlow is imported, from package metadata alone, and
raises one message that says what is installed and what is needed.

Set `BERT_KERAS_SKIP_VERSION_CHECK=1` to bypass it (at your own risk).
"""

import os
from importlib import metadata

# The TensorFlow releases the suite runs on (setup.cfg: tensorflow>=2.20,<2.22). TF-Text must be
# of the same release as TensorFlow (checked in `problems`).
SUPPORTED_RELEASES = ((2, 20), (2, 21))
_RELEASES_TEXT = " or ".join(f"{major}.{minor}.x" for major, minor in SUPPORTED_RELEASES)

# distribution -> (human readable requirement, predicate on the version tuple)
TESTED_MATRIX = {
    "tensorflow": (_RELEASES_TEXT, lambda v: v[:2] in SUPPORTED_RELEASES),
    "tensorflow-text": (f"{_RELEASES_TEXT}, the release of tensorflow", lambda v: v[:2] in SUPPORTED_RELEASES),
    "keras": (">=3.15,<4 (Keras 3)", lambda v: (3, 15) <= v[:2] and v[0] == 3),
}

_NEWEST = "%d.%d" % SUPPORTED_RELEASES[-1]
INSTALL_HINT = f'pip install "tensorflow~={_NEWEST}.0" "tensorflow-text~={_NEWEST}.0" "keras>=3.15,<4"'


class IncompatibleEnvironmentError(ImportError):
    """Raised when the installed TensorFlow stack is outside the tested matrix."""


def _version_tuple(version):
    parts = []
    for piece in version.split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def installed_versions():
    """Returns {distribution: version or None} for the checked distributions."""
    found = {}
    for name in TESTED_MATRIX:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    # GPU / CPU builds of TensorFlow publish under other names.
    if found["tensorflow"] is None:
        for alias in ("tensorflow-cpu", "tf-nightly", "tensorflow-intel", "tensorflow-macos"):
            try:
                found["tensorflow"] = metadata.version(alias)
                break
            except metadata.PackageNotFoundError:
                pass
    return found


def problems(found=None):
    """Lists every mismatch as a readable line; an empty list means all is well."""
    found = installed_versions() if found is None else found
    lines = []
    for name, (wanted, ok) in TESTED_MATRIX.items():
        have = found.get(name)
        if have is None:
            lines.append(f"{name}: not installed, need {wanted}")
        elif not ok(_version_tuple(have)):
            lines.append(f"{name}: {have} installed, need {wanted}")
    tf_v, text_v = found.get("tensorflow"), found.get("tensorflow-text")
    if tf_v and text_v and _version_tuple(tf_v)[:2] != _version_tuple(text_v)[:2]:
        lines.append(
            f"tensorflow {tf_v} and tensorflow-text {text_v} are built for different "
            "releases; TF-Text ops would fail to load with 'undefined symbol'"
        )
    return lines


def install_hint(found=None):
    """The pip command that fixes `found` ({distribution: version or None}).

    Keeps an installed TensorFlow of the matrix and brings TF-Text to its release;
    otherwise installs the newest release of the matrix.

    >>> install_hint({"tensorflow": "2.21.0", "tensorflow-text": "2.20.1", "keras": "3.15.1"})
    'pip install "tensorflow-text~=2.21.0"'

    Args:
        found: as `installed_versions()` returns (None reads the installed packages).
    """
    found = installed_versions() if found is None else found
    tf_v, text_v, keras_v = (found.get(name) for name in ("tensorflow", "tensorflow-text", "keras"))
    packages = []
    release = _version_tuple(tf_v)[:2] if tf_v else None
    if release in SUPPORTED_RELEASES:
        if not text_v or _version_tuple(text_v)[:2] != release:
            packages.append('"tensorflow-text~=%d.%d.0"' % release)
    else:
        packages += [f'"tensorflow~={_NEWEST}.0"', f'"tensorflow-text~={_NEWEST}.0"']
    if not keras_v or not TESTED_MATRIX["keras"][1](_version_tuple(keras_v)):
        packages.append('"keras>=3.15,<4"')
    return "pip install " + " ".join(packages) if packages else INSTALL_HINT


def check_environment():
    if os.environ.get("BERT_KERAS_SKIP_VERSION_CHECK") == "1":
        return
    found_versions = installed_versions()
    found = problems(found_versions)
    if found:
        raise IncompatibleEnvironmentError(
            "bert_keras needs the tested TensorFlow stack:\n  - "
            + "\n  - ".join(found)
            + f"\nFix it with:\n  {install_hint(found_versions)}\n"
            "(or set BERT_KERAS_SKIP_VERSION_CHECK=1 to try anyway)."
        )


# Optional packages `environment_report` lists beside the tested matrix.
OPTIONAL_PACKAGES = ("keras-hub", "tf-models-official", "tensorflow-serving-api", "torch", "transformers")


def environment_report():
    """Versions, devices and whether they are the tested matrix, as one JSON-able dict.

    Imports TensorFlow (to list the devices).

    Example:

    >>> sorted(environment_report())  # doctest: +SKIP
    ['devices', 'matrix_ok', 'platform', 'problems', 'python', 'tested_matrix', 'versions', 'xla_available']
    """
    import platform

    import tensorflow as tf

    found = installed_versions()
    for name in OPTIONAL_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    issues = problems()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": found,
        "tested_matrix": {name: wanted for name, (wanted, _) in TESTED_MATRIX.items()},
        "matrix_ok": not issues,
        "problems": issues,
        "devices": [f"{d.device_type}:{d.name.split(':', 1)[-1]}" for d in tf.config.list_physical_devices()],
        "xla_available": hasattr(tf.config.optimizer, "get_jit"),
    }


def environment_lines(report):
    """`environment_report()` as `bert-keras info` prints it: Python and platform, each version, the devices.

    >>> environment_lines({"python": "3.11.7", "platform": "Linux", "versions": {"keras": "3.11.3"},
    ...                    "devices": ["CPU:0"]})
    ['bert-keras on Python 3.11.7 (Linux)', '  keras                    3.11.3', 'devices: CPU:0']
    """
    return ([f"bert-keras on Python {report['python']} ({report['platform']})"]
            + [f"  {name:24s} {version or '-'}" for name, version in report["versions"].items()]
            + ["devices: " + ", ".join(report["devices"])])
