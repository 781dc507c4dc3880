"""Settings records whose fields are also command-line flags: one name, default and help for both.

A settings dataclass (`PretrainingDataSettings`, `PretrainingOptions`, `ServerOptions`, ...)
declares each field with `option(...)`; `bert-keras` builds the field's flag from it
(`bert_keras.cli.flag_arguments.add_field_options`), so a Python caller and the command line
share the default, the check and the help text. Plain Python (no TensorFlow): `--help` stays fast.

>>> import dataclasses
>>> @dataclasses.dataclass(frozen=True)
... class Run:
...     steps: int = option(100, "optimizer steps (default 100)", type="positive_int")
>>> flag = dataclasses.fields(Run)[0].metadata["flag"]
>>> flag["help"], flag["type"], Run().steps
('optimizer steps (default 100)', 'positive_int', 100)
"""

import dataclasses


def option(default=dataclasses.MISSING, help=None, name=None, *old_names, **flag):
    """A dataclass field with its command-line flag in `metadata["flag"]`.

    Args:
        default: the field's default (none: the field, and its flag, are required).
        help: the flag's help (and the field's documentation).
        name: the flag (default `--field-name`).
        *old_names: earlier spellings, accepted and hidden from `--help`.
        **flag: more of the flag: `group` (its `--help` section), `metavar`, `choices`, `type`
            (a callable, or the name of one of the CLI's checked types: "positive_int",
            "positive_float", "seed", "fraction"), `nargs`, `action` ("append").
    """
    return dataclasses.field(default=default, metadata={"flag": dict(flag, help=help, name=name,
                                                                      old_names=old_names)})
