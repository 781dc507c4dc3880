"""The one rule for a JSON object that names a key twice, for every JSON reader (task files in JSON
Lines, SQuAD files, the REST API's request bodies): an error, never one of the values.

Python's `json` keeps the last value and TF Serving's decoder (RapidJSON's FindMember) the first, so
the same text meant two things. No TensorFlow: the REST codec uses it in the query client too.
"""


class RepeatedKeyError(Exception):
    """A JSON object names a key twice (`args[0]`); each reader says where."""


def object_of_unique_keys(pairs):
    """`json.loads`' `object_pairs_hook` of every JSON reader: a JSON object as a dict; a key named
    twice is a `RepeatedKeyError` (`json` would keep the last value).

    >>> import json
    >>> json.loads('{"a": 1, "b": 2}', object_pairs_hook=object_of_unique_keys)
    {'a': 1, 'b': 2}
    >>> json.loads('{"a": 1, "a": 2}', object_pairs_hook=object_of_unique_keys)
    Traceback (most recent call last):
    ...
    pipelines.json_objects.RepeatedKeyError: a
    """
    row = {}
    for key, value in pairs:
        if key in row:
            raise RepeatedKeyError(key)
        row[key] = value
    return row
