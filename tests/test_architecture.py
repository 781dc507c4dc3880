"""The layer rules of ../shared/docs/architecture.md, checked on the source: arrows point down, no cycles.

Every import counts, at module level or inside a function: a function-level import is still a
dependency, only a later one.
"""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("pipelines", "bert_keras", "serving")

# Bottom to top. A module may import its own layer and the layers below, never above.
LAYERS = {
    1: "pipelines",
    2: "bert_keras core",
    3: "fine-tuned model directory",
    4: "serving",
    5: "bert_keras.tasks",
    6: "bert_keras.cli and bert_keras.examples",
}
FINETUNED_DIRECTORY_MODULE = "bert_keras.finetuned_model"
THIRD_PARTY_ABOVE_PIPELINES = ("keras", "keras_hub", "keras_nlp", "tf_keras")


def layer_of(module):
    top = module.split(".")[0]
    if top == "pipelines":
        return 1
    if top == "serving":
        return 4
    if module == FINETUNED_DIRECTORY_MODULE or module.startswith(FINETUNED_DIRECTORY_MODULE + "."):
        return 3
    if module == "bert_keras.tasks" or module.startswith("bert_keras.tasks."):
        return 5
    if module == "bert_keras.cli" or module.startswith("bert_keras.cli."):
        return 6
    if module == "bert_keras.examples" or module.startswith("bert_keras.examples."):
        return 6
    return 2


def _source_modules():
    modules = {}
    for package in PACKAGES:
        for directory, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(directory, name)
                parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                modules[".".join(parts)] = path
    return modules


MODULES = _source_modules()


def _imports(module, path):
    """The project modules `module` imports (resolved to the deepest existing module)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    is_package = path.endswith("__init__.py")
    found = set()
    third_party = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for name in names:
            top = name.split(".")[0]
            if top not in PACKAGES:
                third_party.add(top)
                continue
            candidate = name
            while candidate and candidate not in MODULES:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != module:
                found.add(candidate)
    return found, third_party


GRAPH = {}
THIRD_PARTY = {}
for _module, _path in MODULES.items():
    GRAPH[_module], THIRD_PARTY[_module] = _imports(_module, _path)


def test_the_source_tree_was_found():
    assert "pipelines.packing" in MODULES and "bert_keras.encoder" in MODULES
    assert "bert_keras.models.encoder_head" in GRAPH["bert_keras.models.classifier"]
    assert "bert_keras.compat" in GRAPH["bert_keras"]


def test_arrows_point_down():
    violations = []
    for module, imported in GRAPH.items():
        for target in imported:
            # A package's __init__ re-exporting its own submodules is not an upward arrow.
            if target.startswith(module + "."):
                continue
            if layer_of(target) > layer_of(module):
                violations.append(f"{module} (layer {layer_of(module)}: {LAYERS[layer_of(module)]}) imports "
                                  f"{target} (layer {layer_of(target)}: {LAYERS[layer_of(target)]})")
    assert not violations, "imports that point up:\n" + "\n".join(sorted(violations))


def test_pipelines_imports_no_keras():
    offenders = sorted(f"{module} imports {name}" for module, names in THIRD_PARTY.items()
                       if layer_of(module) == 1 for name in names if name in THIRD_PARTY_ABOVE_PIPELINES)
    assert not offenders, "\n".join(offenders)


def _cycles(graph):
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    result.append(sorted(component))
    return result


def _without_package_reexports(graph):
    # `pkg/__init__.py` importing `pkg.sub` while `pkg.sub` imports a sibling through `pkg`
    # is how packages re-export; the edge that matters is sub → sibling, kept below.
    return {module: {t for t in targets if not t.startswith(module + ".")} for module, targets in graph.items()}


def test_the_module_graph_has_no_cycles():
    cycles = _cycles(_without_package_reexports(GRAPH))
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
])
def test_the_cycle_finder_finds_cycles(graph, expected):
    assert _cycles(graph) == expected


# -- one owner per task family (bert_keras.families) ------------------------------------------


def _family_modules():
    """{kind: the modules that own it}: the registry, its task class's module, its signature module."""
    from bert_keras.families import KINDS, family

    owners = {}
    for kind in KINDS:
        entry = family(kind)
        owners[kind] = {"bert_keras.families", entry.task_class.partition(":")[0], entry.signatures,
                        entry.requests}
    return owners


def _mentions_kind(node):
    return any(isinstance(n, ast.Name) and n.id == "kind" or isinstance(n, ast.Attribute) and n.attr == "kind"
               for n in ast.walk(node))


def _kind_constants(node, kinds):
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in kinds}


def _kind_dispatch(tree, kinds):
    """(line, kind names) of each if-chain test on a kind name, and of each dict keyed by kind names."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and _mentions_kind(node):
            names = _kind_constants(node, kinds)
            if names:
                found.append((node.lineno, names))
        elif isinstance(node, ast.Dict):
            names = {k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in kinds}
            if len(names) >= 2:
                found.append((node.lineno, names))
    return found


# The reader of format version 1 (before the registry) converts its kinds by hand, once.
LEGACY_KIND_READERS = {("bert_keras.finetuned_model", "_fields_v1")}


def _legacy_lines(tree, module):
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and (module, node.name) in LEGACY_KIND_READERS:
            lines |= set(range(node.lineno, node.end_lineno + 1))
    return lines


def test_a_family_is_dispatched_only_by_its_own_modules():
    owners = _family_modules()
    kinds = set(owners)
    problems = []
    for module, path in MODULES.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        legacy = _legacy_lines(tree, module)
        for line, names in _kind_dispatch(tree, kinds):
            foreign = sorted(name for name in names if module not in owners[name])
            if foreign and line not in legacy:
                problems.append(f"{path}:{line}: dispatches on {foreign}")
    assert not problems, "ask bert_keras.families instead:\n" + "\n".join(problems)


def _signature_names():
    """{input / output name of one family's signatures alone: the modules that own it} (names two
    families share, as `text` or `score`, are nobody's)."""
    import importlib

    from bert_keras.families import KINDS, family

    owners, families = {}, {}
    for kind in KINDS:
        requests = importlib.import_module(family(kind).requests)
        for name in set().union(*requests.INPUTS, *requests.OUTPUTS):
            families.setdefault(name, set()).add(family(kind).requests)
            owners.setdefault(name, set()).update(_family_modules()[kind])
    return {name: owners[name] for name, holders in families.items() if len(holders) == 1}


def test_a_family_s_signature_names_are_read_only_by_its_own_modules():
    """A client or server that tests for `"entity_text" in outputs` or `names == {"question", ...}`
    holds family knowledge: it belongs in the family's request module (`serving.requests`)."""
    owners = _signature_names()
    assert {"entity_text", "answer", "choice", "endings", "embedding", "text_b"} <= set(owners)
    problems = []
    for module, path in MODULES.items():
        if module.startswith("bert_keras.examples."):  # a user's script may read its own model's outputs
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                foreign = sorted({n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
                                  and n.value in owners and module not in owners[n.value]})
                if foreign:
                    problems.append(f"{path}:{node.lineno}: tests {foreign}")
    assert not problems, "ask the family's serving.requests module instead:\n" + "\n".join(problems)


def test_a_family_s_query_flags_are_named_only_by_its_request_module():
    """`--question` / `--context` / ... are declared by the families that read them (`FLAGS` of
    `serving.requests.*`); the CLI adds what `serving.text_requests.query_flags` lists."""
    from serving.text_requests import query_flags

    flags = {flag for flag, _, _ in query_flags()}
    assert {"--text-b", "--question", "--context", "--ending"} <= flags
    problems = []
    for module, path in MODULES.items():
        if module.startswith("serving.requests."):
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        problems += [f"{path}:{n.lineno}: {n.value}" for n in ast.walk(tree)
                     if isinstance(n, ast.Constant) and n.value in flags]
    assert not problems, "declare the flag in the family's serving.requests module:\n" + "\n".join(problems)


def test_no_cli_command_asks_a_task_what_it_can_do_by_its_attributes():
    """`hasattr(task, "predict_squad")` is family knowledge written outside the family: a command
    asks the task's `Family` (`bert_keras.families`) instead."""
    problems = []
    for module, path in MODULES.items():
        if not module.startswith("bert_keras.cli."):
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        problems += [f"{path}:{n.lineno}" for n in ast.walk(tree) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Name) and n.func.id in ("hasattr", "getattr")
                     and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == "task"]
    assert not problems, "ask the task's Family instead: " + ", ".join(problems)


def test_the_dispatch_finder_finds_if_chains_and_tables():
    source = 'if task.kind == "ner":\n    pass\nTABLE = {"squad": 1, "ner": 2}\nok = {"squad": 1}\n'
    assert _kind_dispatch(ast.parse(source), {"ner", "squad"}) == [(1, {"ner"}), (3, {"squad", "ner"})]


def test_only_the_fine_tuned_model_module_names_task_json():
    problems = []
    for module, path in MODULES.items():
        if module == FINETUNED_DIRECTORY_MODULE:
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        problems += [f"{path}:{n.lineno}" for n in ast.walk(tree)
                     if isinstance(n, ast.Constant) and n.value == "task.json"]
    assert not problems, "read and write task.json through bert_keras.finetuned_model: " + ", ".join(problems)


def test_no_cli_subcommand_imports_another():
    """A subcommand (a `bert_keras.cli` module with `register`) shares code through the
    `*_arguments` modules, never by importing another subcommand."""
    subcommands = set()
    for module, path in MODULES.items():
        if module.startswith("bert_keras.cli."):
            with open(path, encoding="utf-8") as f:
                if any(isinstance(n, ast.FunctionDef) and n.name == "register" for n in ast.parse(f.read()).body):
                    subcommands.add(module)
    assert "bert_keras.cli.finetune" in subcommands and "bert_keras.cli.predict" in subcommands
    problems = [f"{module} imports {target}" for module in sorted(subcommands)
                for target in sorted(GRAPH[module] & subcommands) if target != module]
    assert not problems, problems


def test_examples_use_the_public_api_not_the_cli():
    """An example script (`bert_keras.examples`, which `bert-keras quickstart` runs) is what a user
    would write: it calls `bert_keras.tasks`, `serving` and `pipelines`, never the CLI's modules."""
    examples = [module for module in MODULES if module.startswith("bert_keras.examples.")]
    assert "bert_keras.examples.quickstart" in examples
    problems = [f"{module} imports {target}" for module in sorted(examples) for target in sorted(GRAPH[module])
                if target == "bert_keras.cli" or target.startswith("bert_keras.cli.")]
    assert not problems, problems
