"""Property: whatever sequence of script steps, Spark writes, IO-manager materializations, hand
edits of source data and code, snapshots, restores, snapshot deletions and gc runs, every
restore brings back each ref's data version and lineage exactly as its snapshot had them, and
after gc every remaining snapshot still restores.

The expected state of a snapshot is taken with `Workspace.version_of` and the store's lineage
(each record's identity: what was made and how, not when) when it is taken, not from what the
snapshot recorded: the test does not trust the code it checks.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance, asset, materialize
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from dws_dagster import LineageBuilder, Workspace, dws_ref
from dws_dagster.snapshots.garbage import collect_garbage
from dws_dagster.snapshots.index import delete_snapshot, list_snapshots
from dws_dagster.snapshots.restore import restore_snapshot
from dws_dagster.snapshots.take import take_snapshot
from dws_dagster.spark import storage
from dws_dagster.workspace.records import record_identity
from tests.conftest import run_step, write
from tests.support.pipeline import io_manager

SRC = "src/trips.csv"
CODE = "code/train.py"
TEXT = st.sampled_from(["a\n1\n", "a\n2\n", "a\n1\n2\n", "b\n"])


class RetentionMachine(RuleBasedStateMachine):
    spark: Any = None

    @initialize()
    def make_workspace(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="dws-seq-"))
        ws = Workspace.init(self.tmp / "ws")
        ws.add_resource("src", "source-data", path="data/src")
        ws.add_resource("inter", "intermediate-data", path="data/inter")
        ws.add_resource("results", "results", path="results")
        ws.add_resource("code", "code", path="code")
        write(ws.local_path(SRC), "a\n1\n")
        write(ws.root / CODE, "print(1)\n")
        self.ws = ws
        self.instance = DagsterInstance.ephemeral()
        self.expected: dict[str, tuple[dict[str, str | None], dict[str, Any]]] = {}
        self.count = 0

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ changes

    @rule(text=TEXT)
    def hand_edit_source(self, text: str) -> None:
        write(self.ws.local_path(SRC), text)

    @rule(text=TEXT)
    def hand_edit_code(self, text: str) -> None:
        write(self.ws.root / CODE, f"print({text!r})\n")

    @rule(scale=st.integers(1, 3))
    def script_step(self, scale: int) -> None:
        run_step(self.ws, "prep", [SRC], {"inter/prep": f"scale={scale}\n"}, {"scale": scale})

    @rule(rows=st.integers(1, 4))
    @precondition(lambda self: self.ws.store.get("inter/prep") is not None)
    def spark_step(self, rows: int) -> None:
        """A step writing through the Spark storage layer the IO manager uses (marker and
        all), reading what the script step wrote."""
        builder = (
            LineageBuilder()
            .with_step_name("features")
            .with_parameters({"rows": rows})
            .with_workspace_directory(self.ws.root)
            .with_input_refs(["inter/prep"])
        )
        with builder.eval() as lineage:
            lineage.add_output_ref("inter/features")
            frame = self.spark.createDataFrame(
                [(n, f"r{n}") for n in range(rows)], "n INT, s STRING"
            )
            storage.write_atomic(frame, str(self.ws.local_path("inter/features")))

    @rule(rows=st.integers(1, 3))
    def io_manager_materialization(self, rows: int) -> None:
        """An asset materialized by Dagster through the Spark IO manager: its lineage is
        recorded by the IO manager itself, its data written with the marker."""
        spark = self.spark

        @asset(metadata=dws_ref("inter", "counts"))
        def counts() -> Any:
            return spark.range(rows)

        result = materialize(
            [counts], instance=self.instance, resources={"io_manager": io_manager(self.ws)}
        )
        assert result.success

    @rule(mae=st.sampled_from([1.5, 1.2]))
    @precondition(lambda self: self.ws.store.get("inter/prep") is not None)
    def results_step(self, mae: float) -> None:
        run_step(
            self.ws,
            "train",
            ["inter/prep"],
            {},
            {"gamma": 0.1},
            results={"mae": mae},
            results_dir="results/exp",
        )

    @rule(text=TEXT)
    @precondition(lambda self: self.ws.store.get("inter/prep") is not None)
    def hand_edit_step_output(self, text: str) -> None:
        write(self.ws.local_path("inter/prep") / "part-0.csv", text)  # drift

    # ------------------------------------------------------------------ snapshots

    def _now(self) -> tuple[dict[str, str | None], dict[str, Any]]:
        refs = {SRC, "code", *(ref for ref, _ in self.ws.store.items())}
        data = {}
        for ref in sorted(refs):
            try:
                data[ref] = self.ws.version_of(ref)
            except FileNotFoundError:
                data[ref] = None
        # What a snapshot is of: a re-run with the same data and parameters is the same state
        # (its snapshot is the earlier one's, with the earlier records' times).
        lineage = {
            ref: (
                state.status,
                state.owner,
                None if state.record is None else record_identity(state.record),
            )
            for ref, state in self.ws.store.items()
        }
        return data, lineage

    @rule()
    def snapshot(self) -> None:
        self.count += 1
        tag = f"s{self.count}"
        outcome = take_snapshot(self.ws, tag)
        assert tag in outcome.info.tags
        self.expected[tag] = self._now()

    @rule(data=st.data())
    @precondition(lambda self: self.expected)
    def restore(self, data: st.DataObject) -> None:
        tag = data.draw(st.sampled_from(sorted(self.expected)))
        self._restore_and_check(tag)

    def _restore_and_check(self, tag: str) -> None:
        report = restore_snapshot(self.ws, tag, code=True)
        assert report.not_restored == [] and report.code_left == []
        assert self._now() == self.expected[tag], tag

    @rule(data=st.data())
    @precondition(lambda self: self.expected)
    def delete(self, data: st.DataObject) -> None:
        tag = data.draw(st.sampled_from(sorted(self.expected)))
        info = next(i for i in list_snapshots(self.ws) if tag in i.tags)
        delete_snapshot(self.ws, info.hash)  # the snapshot, with every tag it has
        for other in info.tags:
            self.expected.pop(other, None)

    @rule()
    def gc(self) -> None:
        collect_garbage(self.ws)
        for tag in sorted(self.expected):
            self._restore_and_check(tag)

    @invariant()
    def snapshots_are_the_expected_ones(self) -> None:
        if hasattr(self, "ws"):
            tags = {tag for info in list_snapshots(self.ws) for tag in info.tags}
            assert tags == set(self.expected)


@pytest.mark.filterwarnings("ignore:step .* changed outside any recorded step")
def test_every_restore_brings_back_its_snapshot_whatever_happened_before(spark) -> None:
    RetentionMachine.spark = spark
    machine = RetentionMachine.TestCase
    machine.settings = settings(
        max_examples=25,
        stateful_step_count=16,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    machine().runTest()
