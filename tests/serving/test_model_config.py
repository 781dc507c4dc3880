"""models.config text protos: parse, format, round trip, errors that name file and place, agreement with TF Serving's pb2."""

import pytest

from serving.server.model_config import (
    ModelConfigError,
    ModelSource,
    format_models_config,
    parse_models_config,
    read_models_config,
    write_models_config,
)

FULL = """
# two models, every policy kind
model_config_list {
  config {
    name: "bert"
    base_path: "/models/bert"
    model_platform: "tensorflow"
    model_version_policy { latest { num_versions: 2 } }
    version_labels { key: "stable" value: 1 }
    version_labels { key: "canary" value: 3 }
  }
  config: {
    name: 'squad'  # single quotes, colon before the brace
    base_path: "/models/" "squad"
    model_version_policy { specific { versions: 1 versions: [2, 4] } }
  }
  config <
    name: "emb"
    base_path: "rel/emb"
    model_version_policy: { all {} }
  >
}
"""


def test_parse_full_config():
    bert, squad, emb = parse_models_config(FULL)
    assert bert == ModelSource("bert", "/models/bert", "latest", 2, (), {"stable": 1, "canary": 3})
    assert squad == ModelSource("squad", "/models/squad", "specific", versions=(1, 2, 4))
    assert emb == ModelSource("emb", "rel/emb", "all")
    # defaults: latest 1, no labels
    (only,) = parse_models_config('model_config_list { config { name: "m" base_path: "/m" } }')
    assert (only.version_policy, only.num_versions, only.versions, only.labels) == ("latest", 1, (), {})


def test_format_round_trip(tmp_path):
    models = parse_models_config(FULL)
    text = format_models_config(models)
    assert parse_models_config(text) == models
    with pytest.raises(ValueError, match="letters, digits"):
        ModelSource('we"ird', "/m")
    odd = ModelSource("weird", '/path with \\ and " and é\n', labels={"a": 2})
    assert parse_models_config(format_models_config([odd])) == [odd]
    path = tmp_path / "models.config"
    write_models_config(path, models)
    read = read_models_config(path)
    assert read[0] == models[0]
    assert read[2].base_path == str(tmp_path / "rel" / "emb")  # relative to the file


def test_agrees_with_tf_serving_text_format():
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    for text in (FULL, format_models_config(parse_models_config(FULL))):
        proto = text_format.Parse(text, model_server_config_pb2.ModelServerConfig())
        ours = parse_models_config(text)
        assert [c.name for c in proto.model_config_list.config] == [m.name for m in ours]
        for config, model in zip(proto.model_config_list.config, ours):
            assert config.base_path == model.base_path
            policy = config.model_version_policy
            kind = policy.WhichOneof("policy_choice") or "latest"
            assert kind == model.version_policy
            if kind == "latest":
                assert (policy.latest.num_versions or 1) == model.num_versions
            if kind == "specific":
                assert tuple(sorted(policy.specific.versions)) == model.versions
            assert dict(config.version_labels) == model.labels


def model_m(*lines):
    """A config of model "m" whose extra `lines` start on line 4."""
    return 'model_config_list {\n config {\n  name: "m" base_path: "/m"\n' + "".join(f"  {line}\n" for line in lines) + " }\n}"


# Where text_format gives a position, the message starts "file:line:column: "; errors it cannot
# place (values checked after parsing) start "file: " and name the config entry instead.
@pytest.mark.parametrize(
    "text, place, words",
    [
        ('model_config_list {\n config {\n  nmae: "m"\n }\n}', "3:3", ["unknown field 'nmae'", "name, base_path"]),
        ('model_config_list {\n config {\n  name: "m"\n  base_path: "/m"\n  name: "n"\n }\n}', "5:9",
         ['multiple "name" fields']),
        ('model_config_list {\n config {\n  name: "m"\n }\n}', "", ["config #1 ('m')", "missing base_path"]),
        ('model_config_list {\n config {\n  name: m\n  base_path: "/m"\n }\n}', "3:9", ["Expected string"]),
        ('model_config_list {\n config {\n  name: "m"\n  base_path: "/m"\n', "4:14", ['Expected "}"']),
        (model_m("model_version_policy {", " latest { num_versions: 1 }", " all {}", "}"), "6:4",
         ['"all"', '"latest"', "oneof"]),
        (model_m("model_version_policy { }"), "", ["config #1 ('m')", "one of latest {}, all {}, specific {}"]),
        (model_m("model_version_policy { specific { } }"), "", ["config #1 ('m')", "at least one versions: N"]),
        (model_m('model_version_policy { latest { num_versions: "2" } }'), "4:49", ["integer"]),
        (model_m("model_version_policy { latest { num_versions: -1 } }"), "4:49", ["out of range"]),
        (model_m("model_version_policy { specific { version: 1 } }"), "4:37",
         ["unknown field 'version' in Specific", "expected one of: versions"]),
        ('model_config_list {\n config { name: "m" base_path: "/m" }\n config { name: "m" base_path: "/n" }\n}', "",
         ["config #2 ('m')", "used twice", "config #1"]),
        (model_m('model_platform: "pytorch"'), "", ["config #1 ('m')", "pytorch", "tensorflow"]),
        (model_m("model_type: TENSORFLOW"), "", ["config #1 ('m')", "model_type", "deprecated"]),
        (model_m("logging_config { }"), "", ["config #1 ('m')", "logging_config", "not supported", "remove it"]),
        (model_m('version_labels { key: "a" value: 1 }', 'version_labels { key: "a" value: 2 }'), "",
         ["config #1 ('m')", "label 'a'", "twice"]),
        (model_m('version_labels { key: "1" value: 1 }'), "", ["label '1'", "must not be a number"]),
        ('\n\nmodel_config_list { config { name: "m" base_path: "/m" $ } }', "3:56", ["$"]),
        ('model_config_list {\n config { name: "a b" base_path: "/m" }\n}', "", ["'a b'", "letters, digits"]),
        ('model_config_list { config { name: "\\xff" base_path: "/m" } }', "1:43", ["utf-8"]),
        ('model_config_list { config { name: "m" } }\nmodel_config_list { }', "2:19", ['multiple "model_config_list"']),
        ('custom_model_config { }', "", ["custom_model_config", "not supported"]),
        ('custom_model_config { [type.googleapis.com/tensorflow.serving.ModelConfig] { name: "x" } }', "",
         ["custom_model_config", "not supported"]),
        ('model_config_list { }', "", ["no config"]),
        ('', "", ["missing model_config_list"]),
        # numbers take ASCII digits only (text_format itself would read '９' as 9)
        (model_m("model_version_policy { specific { versions: ９ } }"), "4:47", ["'９'", "ASCII", "0-9"]),
        (model_m("model_version_policy { latest { num_versions: ٣ } }"), "4:49", ["'٣'", "ASCII"]),
    ],
)
def test_errors_name_file_and_place(text, place, words):
    with pytest.raises(ModelConfigError) as info:
        parse_models_config(text, source="deploy/models.config")
    message = str(info.value)
    assert message.startswith(f"deploy/models.config:{place}: " if place else "deploy/models.config: "), message
    for word in words:
        assert word in message, (word, message)
    assert len(message) < 300, message  # text_format's echo of the whole line is cut


def test_errors_never_echo_a_long_line_nor_escape_as_other_exceptions():
    long_line = 'model_config_list { config { name: "' + "m" * 100_000 + '" base_path: 7 } }'
    with pytest.raises(ModelConfigError) as info:
        parse_models_config(long_line, source="f")
    assert str(info.value) == "f:1:100050: Expected string but found: '7'", str(info.value)[:300]
    deep = "model_config_list {\n" + "config {" * 100_000 + "}" * 100_001
    with pytest.raises(ModelConfigError, match=r"^f:2:\d+: messages nested more than 64 deep"):
        parse_models_config(deep, source="f")
    for text in ("model_config_list { config { name: 'm\\", '"', "<" * 70, "model_config_list { config: [ ] }",
                 "model_config_list { config { name: \"m\" base_path: \"/m\" } } custom_model_config { }",
                 "[x.y] { }", "model_config_list: 3", "\x00", "model_config_list { config { 99: 1 } }"):
        with pytest.raises(ModelConfigError, match=r"^f:"):
            parse_models_config(text, source="f")


def test_proto3_defaults_read_as_tf_serving_reads_them():
    # num_versions 0 is "not set" in proto3; TF Serving serves the latest 1 then, and so do we.
    (model,) = parse_models_config(model_m("model_version_policy { latest { num_versions: 0 } }"))
    assert (model.version_policy, model.num_versions) == ("latest", 1)
    (model,) = parse_models_config(model_m("model_version_policy { latest { } }", 'model_platform: ""'))
    assert (model.version_policy, model.num_versions) == ("latest", 1)


def test_versions_and_labels_are_any_int64_as_tf_serving_reads_them():
    """TF Serving serves a version directory "0" or "-1" (safe_strto64) and takes any int64 in specific
    versions and version_labels; `versions: 0` and a label to 0 were refused ("positive")."""
    (model,) = parse_models_config(model_m("model_version_policy { specific { versions: [1, 0, -2] } }",
                                           'version_labels { key: "a" value: 0 }', 'version_labels { key: "b" }',
                                           'version_labels { key: "c" value: -2 }'))
    assert model.versions == (-2, 0, 1) and model.labels == {"a": 0, "b": 0, "c": -2}
    assert ModelSource("m", "/m", version_policy="specific", versions=(0,), labels={"z": 0}).versions == (0,)
    with pytest.raises(ValueError, match="int64"):
        ModelSource("m", "/m", version_policy="specific", versions=(2 ** 63,))
    with pytest.raises(ValueError, match="int64"):
        ModelSource("m", "/m", labels={"a": -2 ** 63 - 1})


def test_the_allow_list_names_fields_of_tf_servings_schema():
    from tensorflow_serving.config import model_server_config_pb2

    from serving.server.model_config import HONOURED_FIELDS

    seen, todo = {}, [model_server_config_pb2.ModelServerConfig.DESCRIPTOR]
    while todo:
        descriptor = todo.pop()
        if descriptor.name in HONOURED_FIELDS and descriptor.name not in seen:
            seen[descriptor.name] = {f.name for f in descriptor.fields}
            todo += [f.message_type for f in descriptor.fields if f.message_type is not None]
    assert set(seen) == set(HONOURED_FIELDS)
    for name, fields in HONOURED_FIELDS.items():
        assert set(fields) <= seen[name], (name, fields)


def test_model_source_validation():
    with pytest.raises(ValueError, match="version_policy"):
        ModelSource("m", "/m", version_policy="newest")
    with pytest.raises(ValueError, match="specific"):
        ModelSource("m", "/m", version_policy="specific")
    with pytest.raises(ValueError, match="only used"):
        ModelSource("m", "/m", versions=(1,))
    with pytest.raises(ValueError, match="number"):
        ModelSource("m", "/m", labels={"2": 1})
    assert ModelSource("m", "/m", version_policy="specific", versions=[3, 1, 3]).versions == (1, 3)


def test_read_errors(tmp_path):
    with pytest.raises(ModelConfigError, match="cannot read"):
        read_models_config(tmp_path / "missing.config")


def test_batching_parameters_read_both_forms_and_skip_the_rest():
    from serving.server.model_config import parse_batching_parameters

    text = ("max_batch_size { value: 8 }\nthread_pool_name { value: 'x' }\nallowed_batch_sizes: [4, 8]\n"
            "num_batch_threads: 2;\nbatch_timeout_micros < value: 0 >\nenable_large_batch_splitting { value: true }")
    assert parse_batching_parameters(text) == {
        "max_batch_size": 8, "allowed_batch_sizes": (4, 8), "num_batch_threads": 2, "batch_timeout_micros": 0,
        "ignored": ["thread_pool_name", "enable_large_batch_splitting"]}
    assert parse_batching_parameters("allowed_batch_sizes: []") == {"allowed_batch_sizes": (), "ignored": []}
    for bad, error in [("max_batch_size { value: 8", "b:1: max_batch_size { value: N } expected"),
                       ("\nmax_batch_size { size: 8 }", "b:2: max_batch_size { value: N } expected"),
                       ("x: 1\nthread_pool_name {", "b:2: thread_pool_name is not closed"),
                       ("max_batch_size: ９", "b:1:17: '９' is not ASCII"),
                       ("max_batch_size: 1.5", "b:1: max_batch_size must be an integer, got '1.5'"),
                       ("allowed_batch_sizes: [4 8]", "b:1: allowed_batch_sizes: [N, N, ...] expected"),
                       ("allowed_batch_sizes: [4, x]", "b:1: allowed_batch_sizes must be integers, got 'x'"),
                       # was skipped in silence (then "not used"): a wrapper TF Serving cannot parse
                       ("\nallowed_batch_sizes { value: 4 }", "b:2: allowed_batch_sizes: N or allowed_batch_sizes: "
                                                             "[N, N, ...] expected"),
                       ("}", "b:1:1: Expected identifier")]:
        with pytest.raises(ModelConfigError) as info:
            parse_batching_parameters(bad, source="b")
        assert str(info.value).startswith(error), str(info.value)


PIECES = list('{}<>[]:;,"\'\\# \n0123456789-.x٣９') + [
    "model_config_list", "config", "name", "base_path", "model_platform", "model_version_policy", "latest", "all",
    "specific", "num_versions", "versions", "version_labels", "key", "value", "max_batch_size", '"m"', '"/m"']


def test_any_text_gives_models_or_a_model_config_error():
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st

    from serving.server.model_config import parse_batching_parameters

    @hypothesis.settings(max_examples=300, deadline=None, derandomize=True)
    @hypothesis.given(st.lists(st.sampled_from(PIECES), max_size=60).map(" ".join))
    def check(text):
        for parse in (parse_models_config, parse_batching_parameters):
            try:
                parse(text, source="f")
            except ModelConfigError as error:
                assert str(error).startswith("f:"), error

    check()
