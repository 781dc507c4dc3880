"""Whether a version directory is ready to load: complete, and no longer being written.

`cp -r`, `gsutil cp` and `rsync` write a version directory file by file, in no set order, so a
poll can see `saved_model.pb` before the variables exist, or everything but `assets/labels.txt`.
`readiness` answers ready only when

- the directory holds `saved_model.pb` (or `.pbtxt`),
- if it has a `variables/` directory: `variables.index` and every data shard the shard
  names promise (`variables.data-00000-of-00002` needs `...-00001-of-00002` too),
- and, for an export with a manifest (`serving.export_manifest`, written last by
  `serving.exporter`): every file the manifest lists is there at its listed size (the
  checksums are verified once, by the load);
- or, for a SavedModel without one: every file is settled, unchanged for `settle_s` (the
  newest is older than that, or a second look `settle_s` after the newest write finds the
  same names, sizes and mtimes). A writer that pauses longer than `settle_s` between two
  files defeats this rule, which is why the exporter writes the manifest.

`snapshot` (names, sizes, mtimes of every file) is also the fingerprint the registry compares
to decide that a version changed after it was loaded, or that a version that failed to load
has been replaced and is worth a fresh attempt.

Example:
    >>> version_ready("/models/bert/3")       # doctest: +SKIP
    True
    >>> readiness("/models/bert/4")           # doctest: +SKIP
    (False, 'assets/labels.txt: 7 of 23 bytes')
"""

from __future__ import annotations

import os
import re
import time

from serving.export_manifest import COMPLETE, WRITING, check_manifest

_SHARD = re.compile(r"variables\.data-([0-9]+)-of-([0-9]+)")  # ASCII digits: what TensorFlow writes
# TF Serving's safe_strto64 (tsl/platform/numbers.cc): C-locale spaces around, an optional "-", ASCII digits.
_VERSION_NAME = re.compile(r"[ \t\n\v\f\r]*(-?)([0-9]+)[ \t\n\v\f\r]*")
MAX_VERSION = 2 ** 63 - 1  # the largest version TF Serving reads: int64's maximum, 9223372036854775807 (19 digits)
MIN_VERSION = -2 ** 63  # and the smallest: int64's minimum


def version_of_name(name: str):
    """The version a directory name stands for as TF Serving reads it (an int64), or None.

    TF Serving's file_system_storage_path_source (`ParseVersionNumber`) reads a child of the base path
    with `safe_strto64`: ASCII digits with an optional "-" (no "+"), leading zeros allowed ("007" is 7),
    spaces, tabs and newlines around ignored (" 7" is 7), within int64 (19 digits); anything else is no
    version. So "0" is version 0 and "-1" version -1, both served like any other (the latest policy
    picks the highest). `str.isdigit()` also takes "²" (which int() refuses) and "９" (which int()
    reads as 9): neither is a version.

    >>> version_of_name("12"), version_of_name("007"), version_of_name("９"), version_of_name("1a")
    (12, 7, None, None)
    >>> version_of_name("0"), version_of_name("-3"), version_of_name("+3"), version_of_name(" 3 "), version_of_name("-")
    (0, -3, None, 3, None)
    >>> version_of_name("9223372036854775807"), version_of_name("9223372036854775808")
    (9223372036854775807, None)
    """
    match = _VERSION_NAME.fullmatch(name)
    if match is None:
        return None
    sign, digits = match.group(1), match.group(2).lstrip("0") or "0"
    if len(digits) > 19:  # past int64 (and never int() of thousands of digits)
        return None
    version = -int(digits) if sign else int(digits)
    return version if MIN_VERSION <= version <= MAX_VERSION else None


def is_version_name(name: str) -> bool:
    """True for a version directory name as TF Serving reads one (`version_of_name`).

    >>> is_version_name("12"), is_version_name("0"), is_version_name("９"), is_version_name("²"), is_version_name("1a")
    (True, True, False, False, False)
    """
    return version_of_name(name) is not None


def snapshot(path: str) -> tuple:
    """Sorted ((relative path, size, mtime_ns), ...) of every file under `path`; () when unreadable."""
    entries = []
    try:
        for root, _, files in os.walk(path):
            for name in files:
                full = os.path.join(root, name)
                try:
                    st = os.stat(full)
                except OSError:
                    continue  # removed while we looked
                entries.append((os.path.relpath(full, path), st.st_size, st.st_mtime_ns))
    except OSError:
        return ()
    return tuple(sorted(entries))


def _complete(files: tuple) -> bool:
    names = {entry[0] for entry in files}
    if "saved_model.pb" not in names and "saved_model.pbtxt" not in names:
        return False
    variables = {n.split(os.sep, 1)[1] for n in names if n.startswith("variables" + os.sep)}
    if not variables:
        return True  # a SavedModel without variables
    if "variables.index" not in variables:
        return False
    for name in variables:
        match = _SHARD.fullmatch(name)
        if match:
            total = int(match.group(2))
            if total > 10_000 or any(f"variables.data-{i:05d}-of-{match.group(2)}" not in variables
                                     for i in range(total)):
                return False
    return True


def readiness(path: str, *, settle_s: float = 1.0) -> tuple:
    """`(ready, why not)` of the version directory `path` (module docstring); `why not` is "" when ready."""
    files = snapshot(path)
    if not files:
        return False, "no files yet"
    if not _complete(files):
        return False, "no saved_model.pb, or its variables/ are incomplete"
    manifest = check_manifest(path)
    if manifest.state == COMPLETE:
        return True, ""
    if manifest.state == WRITING:
        return False, manifest.problem  # still being copied
    # No manifest (or a file longer than it lists, which the load reports): files unchanged for settle_s.
    age = time.time() - max(entry[2] for entry in files) / 1e9
    if age < settle_s:
        time.sleep(settle_s - max(age, 0.0))
        if snapshot(path) != files:
            return False, f"files still changing (no export manifest: waiting until none changed for {settle_s:g} s)"
    return True, ""


def version_ready(path: str, *, settle_s: float = 1.0) -> bool:
    """True when the version directory `path` is complete and not being written (module docstring)."""
    return readiness(path, settle_s=settle_s)[0]
