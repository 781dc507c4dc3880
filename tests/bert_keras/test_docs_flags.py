"""The user docs name only flags the commands have: every `bert-keras COMMAND --flag` in README.md
and docs/*.md (code blocks and inline code, `COMMAND --flag` too when COMMAND is a subcommand's
name) is an option of that command's parser. A renamed or removed flag fails here, not in the
hands of a user who copies the command (argparse: "unrecognized arguments").

benchmarks.md (the benchmark scripts' own flags) and architecture.md are not user commands.
"""

import glob
import os
import re

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SKIPPED = {"benchmarks.md", "architecture.md"}
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def user_docs():
    docs = [os.path.join(ROOT, "README.md")]
    docs += sorted(path for path in glob.glob(os.path.join(ROOT, "docs", "*.md"))
                   if os.path.basename(path) not in SKIPPED)
    return docs


def command_lines(text):
    """Each code block's lines (continuations joined) and each inline code span."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
    for block in blocks:
        yield from re.sub(r"\\\n\s*", " ", block).splitlines()
    yield from re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))


def documented_flags(path, commands):
    """(command, flag, line) for every flag written after a subcommand's name."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    names = "|".join(sorted(map(re.escape, commands), key=len, reverse=True))
    for line in command_lines(text):
        # `bert-keras COMMAND ...` anywhere in the line, or an inline span that starts with COMMAND.
        starts = [m for m in re.finditer(rf"bert-keras ({names})(?![\w-])", line)]
        if not starts:
            bare = re.match(rf"({names})(?= --)", line)
            starts = [bare] if bare else []
        for match in starts:
            rest = line[match.end():]
            rest = re.split(r" -- |\s#|&&|\|\||;|\|", rest)[0]  # Beam's options, comments, the next command
            for flag in FLAG.findall(rest):
                yield match.group(1), flag, line.strip()


@pytest.fixture(scope="module")
def parsers():
    from bert_keras.cli.main import build_parser, command_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return {name: command_parser(parser, name) for name in subparsers.choices}


def test_every_documented_flag_is_an_option_of_its_command(parsers):
    unknown = []
    for path in user_docs():
        for command, flag, line in documented_flags(path, parsers):
            if flag not in parsers[command]._option_string_actions:
                unknown.append(f"{os.path.relpath(path, ROOT)}: bert-keras {command} has no {flag}: {line[:120]}")
    assert not unknown, "\n".join(unknown)


def test_the_check_reads_inline_spans_and_continued_lines(parsers, tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("Run `pretrain --corpus FILE`.\n\n```bash\nbert-keras vocab a.txt -o v.txt \\\n"
                   "    --size 10 --nope\nbert-keras create-pretraining-data --input a -- --project=P\n```\n",
                   encoding="utf-8")
    found = {(command, flag) for command, flag, _ in documented_flags(str(doc), parsers)}
    assert ("pretrain", "--corpus") in found and ("vocab", "--nope") in found
    assert ("vocab", "--size") in found and not any(flag == "--project" for _, flag in found)
