"""Strict JSON, never `NaN` or `Infinity`: what every `bert-keras` subcommand prints or writes.

Python's `json.dumps` writes `NaN`, `Infinity` and `-Infinity` for non-finite floats, which
no JSON parser but Python's accepts (`jq`, JavaScript, Go, Java all fail on the line). A metric
of a degenerate dev set (Pearson of a constant prediction), a diverged loss or an empty
latency list can be non-finite, so every JSON of the CLI (and of `serving.text_requests`) goes
through `dumps`: non-finite floats become `null`, and `allow_nan=False` guarantees nothing else
slips through.

>>> dumps({"pearson": float("nan"), "loss": [0.5, float("inf")]}, sort_keys=True)
'{"loss": [0.5, null], "pearson": null}'
"""

import json
import math


def finite_or_null(value):
    """`value` with every non-finite float (also numpy scalars and arrays) replaced by None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(item) for item in value]
    if type(value).__module__ == "numpy":  # without importing numpy: scalars and arrays
        if hasattr(value, "tolist"):
            return finite_or_null(value.tolist())
    return value


def dumps(value, **options):
    """`json.dumps(finite_or_null(value), allow_nan=False, **options)`.

    Args:
        value: what to write (dicts, lists, numbers, strings; numpy values are converted).
        **options: passed to `json.dumps` (`indent`, `sort_keys`, `ensure_ascii`, `default`).
    """
    return json.dumps(finite_or_null(value), allow_nan=False, **options)


def dump(value, f, **options):
    """Writes `dumps(value, **options)` to the text file `f`."""
    f.write(dumps(value, **options))
