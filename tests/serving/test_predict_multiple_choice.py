"""`bert-keras predict` on a SWAG (multiple-choice) model equals the exported SavedModel's answer."""

import json
import os

import numpy as np
import tensorflow as tf

ITEMS = [("The cat sat on the mat .", ["it slept", "it flew", "it sang", "it ran"]),
         ("John went to Paris .", ["he ate", "he swam", "he read", "he sat"])]


def test_predict_cli_scores_four_endings_like_the_export(finetuned_dir, exported_model, tmp_path, capsys):
    from bert_keras.cli.main import main

    output = tmp_path / "predictions.jsonl"
    texts = [" ||| ".join([context] + endings) for context, endings in ITEMS]
    assert main(["predict", "--model", finetuned_dir("multiple_choice"), *texts,
                 "--output", str(output)]) == 0
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    printed = capsys.readouterr().out
    assert "->" in printed and "wrote 2 predictions" in printed

    base_path, name, version = exported_model("multiple_choice")
    serve = tf.saved_model.load(os.path.join(base_path, name, str(version))).signatures["serving_default"]
    exported = serve(context=tf.constant([c for c, _ in ITEMS]),
                     endings=tf.constant([e for _, e in ITEMS]))
    np.testing.assert_allclose([r["probabilities"] for r in rows], exported["probabilities"].numpy(),
                               rtol=1e-5, atol=1e-6)
    assert [r["choice"] for r in rows] == exported["choice"].numpy().tolist()
    assert [r["ending"] for r in rows] == [e[r["choice"]] for (_, e), r in zip(ITEMS, rows)]


def test_predict_cli_names_the_input_with_the_wrong_number_of_endings(finetuned_dir, capsys, tmp_path):
    from bert_keras.cli.main import main

    assert main(["predict", "--model", finetuned_dir("multiple_choice"), "ctx ||| a ||| b"]) == 2
    assert "TEXT argument 1 ('ctx ||| a ||| b'): a SWAG model scores exactly 4 endings, got 2" in capsys.readouterr().err
    # A line of --input after TEXT arguments: it said "input 3", neither the argument nor the line.
    lines = tmp_path / "items.txt"
    lines.write_text("c ||| a ||| b ||| c ||| d\nctx ||| a\n", encoding="utf-8")
    assert main(["predict", "--model", finetuned_dir("multiple_choice"), "c ||| a ||| b ||| c ||| d",
                 "--input", str(lines)]) == 2
    assert f"--input {lines}, line 2 ('ctx ||| a'): a SWAG model scores exactly 4 endings, got 1" in \
        capsys.readouterr().err


def test_predict_cli_names_the_squad_input_that_is_no_question_context_pair(finetuned_dir, capsys, tmp_path):
    # It said only "a SQuAD model answers (question, context) pairs", not which of the inputs.
    from bert_keras.cli.main import main

    lines = tmp_path / "questions.txt"
    lines.write_text("who? ||| ann lives here.\njust a question\n", encoding="utf-8")
    assert main(["predict", "--model", finetuned_dir("squad"), "--input", str(lines)]) == 2
    err = capsys.readouterr().err
    assert f"--input {lines}, line 2 ('just a question'): a SQuAD model answers a question about a context; write " \
           "it as 'question ||| context' (or give --data FILE.json" in err, err
    assert "tuple" not in err and "predict_squad" not in err  # a script's words
