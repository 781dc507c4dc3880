"""`bert-keras info`: versions, devices, and whether they are the tested matrix."""

import platform
import sys

from bert_keras.cli import json_output


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "info", help=summary, description="Show installed versions, devices and the tested matrix."
    )
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(func=run)


def run(args):
    from bert_keras import compat

    found = compat.installed_versions()
    for extra in ("keras-hub", "tf-models-official", "tensorflow-serving-api", "torch", "transformers"):
        try:
            from importlib import metadata

            found[extra] = metadata.version(extra)
        except Exception:  # not installed
            found[extra] = None
    problems = compat.problems()

    import tensorflow as tf

    devices = [f"{d.device_type}:{d.name.split(':', 1)[-1]}" for d in tf.config.list_physical_devices()]
    report = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": found,
        "tested_matrix": {name: wanted for name, (wanted, _) in compat.TESTED_MATRIX.items()},
        "matrix_ok": not problems,
        "problems": problems,
        "devices": devices,
        "xla_available": hasattr(tf.config.optimizer, "get_jit"),
    }
    if args.json:
        print(json_output.dumps(report, indent=2))
        return 0
    print(f"bert-keras on Python {report['python']} ({report['platform']})")
    for name, version in found.items():
        print(f"  {name:24s} {version or '-'}")
    print("devices: " + ", ".join(devices))
    if problems:
        print("NOT the tested matrix:\n  - " + "\n  - ".join(problems), file=sys.stderr)
        return 1
    print("tested matrix: ok")
    return 0
