"""Helpers that declare a script's command-line parameters once, for argparse and for lineage.

They mirror `dataworkspaces.lineage`'s parameter classes, so scripts using them only change
their import.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from argparse import ArgumentParser, Namespace
from collections.abc import Iterable
from typing import Any

from dws_dagster.errors import InvalidParameterError


class LineageParameter(ABC):
    """A step parameter with a default value."""

    def __init__(self, name: str, default: Any) -> None:
        self.name = name
        self.default = default

    @abstractmethod
    def get_value(self, parsed_args: Namespace) -> Any: ...

    @abstractmethod
    def add_to_arg_parser(self, arg_parser: ArgumentParser) -> None: ...


class CmdLineParameter(LineageParameter):
    """A parameter given as `--name VALUE` on the command line."""

    def __init__(self, name: str, default: Any, type: type, help: str) -> None:
        super().__init__(name, default)
        self.type = type
        self.help = help

    def get_arg_name(self) -> str:
        return "--" + self.name.replace("_", "-")

    def add_to_arg_parser(self, arg_parser: ArgumentParser) -> None:
        arg_parser.add_argument(
            self.get_arg_name(),
            type=self.type,
            default=self.default,
            help=self.help,
            dest=self.name,
        )

    def get_value(self, parsed_args: Namespace) -> Any:
        return getattr(parsed_args, self.name)


class BooleanParameter(CmdLineParameter):
    """A flag: `--name` when it defaults to False, `--no-name` when it defaults to True."""

    def __init__(self, name: str, default: bool, help: str) -> None:
        super().__init__(name, default, bool, help)

    def get_arg_name(self) -> str:
        prefix = "--no-" if self.default else "--"
        return prefix + self.name.replace("_", "-")

    def add_to_arg_parser(self, arg_parser: ArgumentParser) -> None:
        arg_parser.add_argument(
            self.get_arg_name(),
            default=self.default,
            help=self.help,
            action="store_false" if self.default else "store_true",
            dest=self.name,
        )


class ChoiceParameter(CmdLineParameter):
    """A parameter restricted to a set of choices."""

    def __init__(
        self, name: str, choices: Iterable[Any], default: Any, type: type, help: str
    ) -> None:
        super().__init__(name, default, type, help)
        self.choices = list(choices)
        if default not in self.choices:
            raise InvalidParameterError(
                f"default {default!r} of parameter '{name}' is not among its choices "
                f"{self.choices!r}: make the default one of them"
            )

    def add_to_arg_parser(self, arg_parser: ArgumentParser) -> None:
        arg_parser.add_argument(
            self.get_arg_name(),
            type=self.type,
            default=self.default,
            choices=self.choices,
            help=self.help,
            dest=self.name,
        )


class ConstantParameter(LineageParameter):
    """A fixed value recorded in the lineage but not settable from the command line."""

    def get_value(self, parsed_args: Namespace) -> Any:
        return self.default

    def add_to_arg_parser(self, arg_parser: ArgumentParser) -> None:
        return None


def add_lineage_parameters_to_arg_parser(
    parser: ArgumentParser, params: Iterable[LineageParameter]
) -> None:
    for param in params:
        param.add_to_arg_parser(parser)


def get_lineage_parameter_values(
    params: Iterable[LineageParameter], parsed_args: Namespace
) -> dict[str, Any]:
    return {param.name: param.get_value(parsed_args) for param in params}
