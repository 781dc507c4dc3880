"""`bert-keras info`: versions, devices, and whether they are the tested matrix."""

import sys

from bert_keras import json_output


def register(subparsers, summary):
    parser = subparsers.add_parser(
        "info", help=summary, description="Show installed versions, devices and the tested matrix."
    )
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.set_defaults(func=run)


def run(args):
    from bert_keras.compat import environment_lines, environment_report

    report = environment_report()
    if args.json:
        print(json_output.dumps(report, indent=2))
        return 0
    print("\n".join(environment_lines(report)))
    if report["problems"]:
        print("NOT the tested matrix:\n  - " + "\n  - ".join(report["problems"]), file=sys.stderr)
        return 1
    print("tested matrix: ok")
    return 0
