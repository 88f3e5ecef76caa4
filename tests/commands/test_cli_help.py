"""Every sub-command answers --help with examples; --version prints the package version."""

from __future__ import annotations

import pytest

from heterosim import __version__
from heterosim.cli import build_parser, main


def subcommands() -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices)


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and __version__ in capsys.readouterr().out


def test_top_level_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for name in subcommands():
        assert name in out
    assert "%" not in out.replace("% and", "")  # no raw argparse format leaks


@pytest.mark.parametrize("name", subcommands())
def test_each_command_has_help_with_examples(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    assert exit_info.value.code == 0
    assert "example" in capsys.readouterr().out.lower()


def test_no_command_prints_help(capsys):
    assert main([]) == 0
    assert "usage" in capsys.readouterr().out
