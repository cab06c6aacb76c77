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
    """A step parameter with a default value.

    Examples:
        A parameter of your own, read from the environment:

        .. code-block:: python

            import os

            from dws_dagster.lineage import LineageParameter

            class EnvParameter(LineageParameter):
                def get_value(self, parsed_args):
                    return os.environ.get(self.name.upper(), self.default)

                def add_to_arg_parser(self, arg_parser):
                    return None  # not on the command line

            batch = EnvParameter("batch_size", default="512")  # $BATCH_SIZE, else "512"
    """

    def __init__(self, name: str, default: Any) -> None:
        self.name = name
        self.default = default

    @abstractmethod
    def get_value(self, parsed_args: Namespace) -> Any: ...

    @abstractmethod
    def add_to_arg_parser(self, arg_parser: ArgumentParser) -> None: ...


class CmdLineParameter(LineageParameter):
    """A parameter given as `--name VALUE` on the command line.

    Examples:
        .. code-block:: python

            import argparse

            from dws_dagster.lineage import CmdLineParameter

            gamma = CmdLineParameter("gamma", default=0.01, type=float, help="regularisation")
            parser = argparse.ArgumentParser()
            gamma.add_to_arg_parser(parser)  # --gamma VALUE
            assert gamma.get_value(parser.parse_args(["--gamma", "0.5"])) == 0.5
    """

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
    """A flag: `--name` when it defaults to False, `--no-name` when it defaults to True.

    Examples:
        .. code-block:: python

            import argparse

            from dws_dagster.lineage import BooleanParameter

            shuffle = BooleanParameter("shuffle", default=True, help="shuffle the rows")
            parser = argparse.ArgumentParser()
            shuffle.add_to_arg_parser(parser)  # --no-shuffle, as it defaults to True
            assert shuffle.get_value(parser.parse_args(["--no-shuffle"])) is False
    """

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
    """A parameter restricted to a set of choices.

    Examples:
        .. code-block:: python

            import argparse

            from dws_dagster.lineage import ChoiceParameter

            model = ChoiceParameter("model", ["ridge", "lasso"], "ridge", str, help="the model")
            parser = argparse.ArgumentParser()
            model.add_to_arg_parser(parser)  # --model {ridge,lasso}
            assert model.get_value(parser.parse_args(["--model", "lasso"])) == "lasso"
    """

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
    """A fixed value recorded in the lineage but not settable from the command line.

    Examples:
        .. code-block:: python

            import argparse

            from dws_dagster.lineage import ConstantParameter, get_lineage_parameter_values

            seed = ConstantParameter("seed", default=42)  # adds nothing to the parser
            assert get_lineage_parameter_values([seed], argparse.Namespace()) == {"seed": 42}
    """

    def get_value(self, parsed_args: Namespace) -> Any:
        return self.default

    def add_to_arg_parser(self, arg_parser: ArgumentParser) -> None:
        return None


def add_lineage_parameters_to_arg_parser(
    parser: ArgumentParser, params: Iterable[LineageParameter]
) -> None:
    """Add each parameter's option to `parser`, so a script declares its parameters once.

    Examples:
        .. code-block:: python

            import argparse

            from dws_dagster.lineage import (
                BooleanParameter,
                ChoiceParameter,
                CmdLineParameter,
                ConstantParameter,
                LineageBuilder,
                add_lineage_parameters_to_arg_parser,
                get_lineage_parameter_values,
            )

            PARAMS = [
                CmdLineParameter("gamma", default=0.01, type=float, help="regularisation"),
                BooleanParameter("shuffle", default=True, help="shuffle the rows"),  # --no-shuffle
                ChoiceParameter("model", ["ridge", "lasso"], "ridge", str, help="the model"),
                ConstantParameter("seed", default=42),  # recorded, not on the command line
            ]
            parser = argparse.ArgumentParser()
            add_lineage_parameters_to_arg_parser(parser, PARAMS)
            args = parser.parse_args(["--gamma", "0.1", "--no-shuffle"])
            params = get_lineage_parameter_values(PARAMS, args)
            assert params == {"gamma": 0.1, "shuffle": False, "model": "ridge", "seed": 42}
            builder = LineageBuilder().with_step_name("train").with_parameters(params)
    """
    for param in params:
        param.add_to_arg_parser(parser)


def get_lineage_parameter_values(
    params: Iterable[LineageParameter], parsed_args: Namespace
) -> dict[str, Any]:
    """The parameters' values by name, for `LineageBuilder.with_parameters`.

    Examples:
        .. code-block:: python

            import argparse

            from dws_dagster.lineage import (
                BooleanParameter,
                ChoiceParameter,
                CmdLineParameter,
                ConstantParameter,
                LineageBuilder,
                add_lineage_parameters_to_arg_parser,
                get_lineage_parameter_values,
            )

            PARAMS = [
                CmdLineParameter("gamma", default=0.01, type=float, help="regularisation"),
                BooleanParameter("shuffle", default=True, help="shuffle the rows"),  # --no-shuffle
                ChoiceParameter("model", ["ridge", "lasso"], "ridge", str, help="the model"),
                ConstantParameter("seed", default=42),  # recorded, not on the command line
            ]
            parser = argparse.ArgumentParser()
            add_lineage_parameters_to_arg_parser(parser, PARAMS)
            args = parser.parse_args(["--gamma", "0.1", "--no-shuffle"])
            params = get_lineage_parameter_values(PARAMS, args)
            assert params == {"gamma": 0.1, "shuffle": False, "model": "ridge", "seed": 42}
            builder = LineageBuilder().with_step_name("train").with_parameters(params)
    """
    return {param.name: param.get_value(parsed_args) for param in params}
