"""README.md and docs/*.md name only commands, flags and config keys that exist.

Three checks over the Markdown's code (fenced blocks other than Python, and inline code spans):

* every ``mqadmin <subcommand>`` is a subcommand of the real ``mqadmin`` (its ``--help``);
* every flag written after ``mqnamesrv``, ``mqbroker``, ``mqcontroller``, ``rocketq <sub>`` or
  ``mqadmin <sub>`` appears in that command's ``--help``;
* every server config key written as a key (``key=value`` lines of code blocks, ``-o key=value``
  options, the first column of tables headed ``key``) is read by the broker, NameServer or
  controller parser, or is one of their accepted-and-ignored keys.

The commands are asked through their installed entry points, so the check follows the code as it
is.  docs/configuration.md must equal what integration_tests/config_reference.py generates from
the parsers, each key it lists must load through its component's loader without an unknown-key
report, and the files of ``examples/conf`` may use only keys the parsers read.  The checker
itself is tested on a planted page with a wrong subcommand, flag and key.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from rocketq.broker import config_loader as broker_loader
from rocketq.controller import config as controller_config
from rocketq.namesrv import config as namesrv_config
from rocketq.server.properties import parse_properties

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
COMMANDS = ("mqadmin", "mqnamesrv", "mqbroker", "mqcontroller", "rocketq")
#: commands whose first word is a subcommand
WITH_SUBCOMMANDS = frozenset({"mqadmin", "rocketq"})
#: fence languages whose lines are not shell or properties text
SKIPPED_FENCES = frozenset({"python", "py", "json", "yaml", "yml", "java", "javascript", "js", "scala"})

#: a command as the first word of a span or of a shell command (after a prompt, ``&&``, ``;``, ``|``)
_INVOCATION = re.compile(r"(?:^\s*(?:\$\s+)?|[;&|]\s*)(" + "|".join(COMMANDS) + r")(?=\s|$)([^;&|#)`\n]*)")
_FLAG = re.compile(r"^--?[A-Za-z][\w-]*")
#: ``key=value`` as written in a properties file (a blank before ``=`` is an assignment of code)
_KEY_LINE = re.compile(r"^\s*([a-z][A-Za-z0-9]*(?:\.[A-Za-z0-9]+)*)=")
_OPTION_KEY = re.compile(r"(?:^|\s)(?:-o|--option)\s+([a-z][\w.]*)=")
#: words that stand for any key in the docs (``-o key=value``)
PLACEHOLDER_KEYS = frozenset({"key"})
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def _load_config_reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "config_reference", Path(__file__).with_name("config_reference.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


config_reference = _load_config_reference()


@dataclass(frozen=True)
class Code:
    """A piece of code in a Markdown file: one line of a fenced block, or an inline span."""

    path: Path
    line: int
    text: str
    fenced: bool


def code_of(path: Path) -> Iterator[Code]:
    fence: str | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = None if fence is not None else (stripped[3:].strip().lower() or "text")
            continue
        if fence is not None:
            if fence not in SKIPPED_FENCES:
                yield Code(path, number, line, fenced=True)
            continue
        for span in _CODE_SPAN.findall(line):
            yield Code(path, number, span, fenced=False)


def table_keys(path: Path) -> Iterator[tuple[int, str]]:
    """The backticked names in the first column of config key tables (headed ``key | default``
    or ``key | meaning``)."""
    in_key_table = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.startswith("|"):
            in_key_table = False
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        first = cells[0]
        if first.lower() == "key":
            in_key_table = len(cells) > 1 and cells[1].lower() in ("default", "meaning")
        elif in_key_table and not set(first) <= set("-: "):
            for key in _CODE_SPAN.findall(first):
                yield number, key


@functools.cache
def help_text(*command: str) -> str:
    done = subprocess.run(
        [str(BIN / command[0]), *command[1:], "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{' '.join(command)} --help failed:\n{done.stderr}"
    return done.stdout


@functools.cache
def subcommands(command: str) -> frozenset[str]:
    """The subcommands ``command --help`` lists (argparse's ``{a,b}`` line and its indented rows)."""
    text = help_text(command)
    names: set[str] = set()
    for choice in re.findall(r"\{([\w,]+)\}", text):
        names.update(choice.split(","))
    section = text.split("positional arguments:", 1)[-1].split("options:", 1)[0]
    names.update(re.findall(r"^ {4}(\w+)", section, flags=re.MULTILINE))
    assert names, f"no subcommands found in {command} --help:\n{text}"
    return frozenset(names)


def has_flag(target: tuple[str, ...], flag: str) -> bool:
    """Whether ``flag`` is an option of ``target``; for a command with subcommands named without
    one (``mqadmin --tls``), an option of the command or of any of its subcommands."""
    helps = [help_text(*target)]
    if target[0] in WITH_SUBCOMMANDS and len(target) == 1:
        with ThreadPoolExecutor(4) as pool:  # one process per subcommand: ask them side by side
            helps += pool.map(lambda sub: help_text(target[0], sub), sorted(subcommands(target[0])))
    pattern = re.compile(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])")
    return any(pattern.search(text) for text in helps)


def command_problems(code: Code) -> Iterator[str]:
    text = re.sub(r"(^|\s)#.*$", "", code.text) if code.fenced else code.text
    for match in _INVOCATION.finditer(text):
        command, rest = match.group(1), match.group(2).split()
        where = f"{code.path.relative_to(ROOT) if code.path.is_relative_to(ROOT) else code.path}:{code.line}"
        target: tuple[str, ...] = (command,)
        if command in WITH_SUBCOMMANDS and rest and not rest[0].startswith("-"):
            sub = rest.pop(0)
            if not re.fullmatch(r"[A-Za-z]\w*", sub):
                continue  # `mqadmin ...`: any subcommand
            if sub not in subcommands(command):
                yield f"{where}: `{command} {sub}`: no such subcommand"
                continue
            target = (command, sub)
        for token in rest:
            flag = _FLAG.match(token)
            if flag and not has_flag(target, flag.group(0)):
                yield f"{where}: `{' '.join(target)} {flag.group(0)}`: no such flag"


def key_problems(path: Path, known: frozenset[str]) -> Iterator[str]:
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    for code in code_of(path):
        keys = _OPTION_KEY.findall(code.text)
        if code.fenced:
            line_key = _KEY_LINE.match(code.text)
            keys += [line_key.group(1)] if line_key else []
        for key in keys:
            if key not in known and key not in PLACEHOLDER_KEYS:
                yield f"{where}:{code.line}: `{key}` is no broker, NameServer or controller key"
    for number, key in table_keys(path):
        if key not in known:
            yield f"{where}:{number}: `{key}` is no broker, NameServer or controller key"


def problems(paths: list[Path]) -> list[str]:
    known: frozenset[str] = config_reference.documented_keys()
    found: list[str] = []
    for path in paths:
        for code in code_of(path):
            found += command_problems(code)
        found += key_problems(path, known)
    return found


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_configuration_reference_is_generated_from_the_parsers() -> None:
    page = config_reference.PAGE.read_text(encoding="utf-8")
    assert page == config_reference.render(), (
        "docs/configuration.md is stale: run python integration_tests/config_reference.py"
    )


def test_docs_name_only_existing_subcommands_flags_and_keys() -> None:
    assert problems(doc_pages()) == []


def test_every_documented_key_is_read_by_its_loader() -> None:
    """Each key of the reference, set to its default, loads without an unknown-key report."""
    warnings: list[str] = []
    broker = {**config_reference.broker_defaults(), **dict.fromkeys(config_reference.broker_ignored(), "")}
    broker_loader.config_from_properties(broker, warn=warnings.append)
    assert warnings == []
    controller = config_reference.controller_defaults()
    ignored = dict.fromkeys(controller_config.IGNORED_KEYS, "")
    assert controller_config.config_from_properties({**controller, **ignored})[1] == []
    namesrv = {
        **config_reference.namesrv_defaults(),
        **config_reference.tls_defaults(),
        **dict.fromkeys(namesrv_config.IGNORED_KEYS, ""),
        **{k: v for k, v in controller.items() if k != "listenPort"},  # an embedded controller's
    }
    assert namesrv_config.config_from_properties(namesrv)[1] == []


def test_example_conf_files_use_only_keys_the_parsers_read() -> None:
    known = config_reference.documented_keys()
    files = sorted(p for p in (ROOT / "examples" / "conf").rglob("*") if p.is_file())
    assert files
    unknown = {
        str(p.relative_to(ROOT)): sorted(set(parse_properties(p.read_text(encoding="utf-8"))) - known)
        for p in files
    }
    assert {name: keys for name, keys in unknown.items() if keys} == {}


def test_checker_flags_a_planted_wrong_subcommand_flag_and_key(tmp_path: Path) -> None:
    page = tmp_path / "planted.md"
    page.write_text(
        "Run `mqadmin clusterList -n 127.0.0.1:9876`, then `mqadmin noSuchCommand -n x`.\n"
        "\n"
        "```sh\n"
        "mqnamesrv --bind 0.0.0.0 --no-such-flag &\n"
        "mqbroker -c broker.conf -n 127.0.0.1:9876 &  # --not-checked in a comment\n"
        "rocketq dev --controller\n"
        "```\n"
        "\n"
        "```properties\n"
        "brokerName=broker-a\n"
        "noSuchBrokerKey=1\n"
        "```\n"
        "\n"
        "| key | default | meaning |\n"
        "|---|---|---|\n"
        "| `listenPort` | `10911` | port |\n"
        "| `noSuchTableKey` / `deleteWhen` | – | planted |\n",
        encoding="utf-8",
    )
    found = problems([page])
    assert found == [
        f"{page}:1: `mqadmin noSuchCommand`: no such subcommand",
        f"{page}:4: `mqnamesrv --no-such-flag`: no such flag",
        f"{page}:11: `noSuchBrokerKey` is no broker, NameServer or controller key",
        f"{page}:17: `noSuchTableKey` is no broker, NameServer or controller key",
    ]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_answers_help(command: str) -> None:
    assert "usage:" in help_text(command)
