"""TF-Text is a set of custom ops compiled against one TensorFlow release.

Loading it into another release dies with `undefined symbol`; this check runs
first, from package metadata alone, and says which versions are installed and
which TF-Text to install instead. Any release pair is accepted here as long as
both are the same release (2.20 with 2.20, 2.21 with 2.21); `bert_keras.compat`
checks the tested matrix itself.

Set `BERT_KERAS_SKIP_VERSION_CHECK=1` to bypass it (at your own risk).
"""

import os
from importlib import metadata


def _release(version):
    """(major, minor) of "2.21.1" / "2.21.0+cpu"; None for None or an unreadable version."""
    if not version:
        return None
    try:
        return tuple(int(part) for part in version.split("+")[0].split(".")[:2])
    except ValueError:
        return None


def _installed(distribution):
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def pairing_problem(tensorflow_version, tensorflow_text_version):
    """Why a TensorFlow / TF-Text pair cannot load together, with the fix; None when it can.

    >>> pairing_problem("2.21.0", "2.21.1") is None
    True
    >>> print(pairing_problem("2.21.0", "2.20.1"))  # doctest: +ELLIPSIS
    pipelines needs tensorflow and tensorflow-text of the same release; installed: tensorflow 2.21, tensorflow-text 2.20. Fix it with: pip install "tensorflow-text~=2.21.0"...

    Args:
        tensorflow_version: the installed tensorflow version string, or None.
        tensorflow_text_version: the installed tensorflow-text version string, or None.
    """
    tf_release, text_release = _release(tensorflow_version), _release(tensorflow_text_version)
    if tf_release is not None and tf_release == text_release:
        return None
    if tf_release is None:
        fix = 'pip install "tensorflow>=2.20,<2.22" "tensorflow-text>=2.20,<2.22"'
    else:
        fix = 'pip install "tensorflow-text~=%d.%d.0"' % tf_release
    if tensorflow_text_version is None:
        installed = f"tensorflow {tensorflow_version}, tensorflow-text: not installed"
    else:
        installed = (
            f"tensorflow {'.'.join(map(str, tf_release)) if tf_release else tensorflow_version}, "
            f"tensorflow-text {'.'.join(map(str, text_release)) if text_release else tensorflow_text_version}"
        )
    return (
        "pipelines needs tensorflow and tensorflow-text of the same release; installed: "
        f"{installed}. Fix it with: {fix} (TF-Text ops built for another release fail to load "
        "with 'undefined symbol')."
    )


def check_tf_text_pairing():
    """Raises ImportError naming both versions when TensorFlow and TF-Text are of different releases."""
    if os.environ.get("BERT_KERAS_SKIP_VERSION_CHECK") == "1":
        return
    tensorflow_version = _installed("tensorflow")
    for alias in ("tensorflow-cpu", "tensorflow-intel", "tf-nightly"):
        tensorflow_version = tensorflow_version or _installed(alias)
    problem = pairing_problem(tensorflow_version, _installed("tensorflow-text"))
    if problem:
        raise ImportError(problem)


class MissingDependencyError(ImportError):
    """An optional dependency (a `bert-keras[EXTRA]` extra) is not installed; the message says what
    to install. `bert-keras` prints it as a one-line error."""
