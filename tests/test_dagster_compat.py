"""The Dagster internals dws_dagster relies on (dagster_compat.py), each exercised against the
installed Dagster so that an upgrade that moves them fails here, loudly."""


from typing import Any

from dagster import (
    AssetKey,
    Config,
    DagsterInstance,
    InputContext,
    IOManager,
    OutputContext,
    asset,
    materialize,
)
from dagster._core.definitions.data_version import (
    DATA_VERSION_IS_USER_PROVIDED_TAG,
    DATA_VERSION_TAG,
)

from dws_dagster import dagster_compat


class _Probe(IOManager):
    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        self.seen[f"config:{context.asset_key.to_user_string()}"] = \
            dagster_compat.op_config(context)
        dagster_compat.set_data_version(context, f"v-{obj}")

    def load_input(self, context: InputContext) -> Any:
        self.seen["identity"] = dagster_compat.step_identity(context)
        self.seen["consumers"] = dagster_compat.consumer_asset_keys(context)
        self.seen["metadata"] = dagster_compat.asset_metadata(context, AssetKey("child"))
        return 41


class ChildConfig(Config):
    factor: int = 2


@asset
def parent() -> int:
    return 41


@asset(metadata={"owner": "me"})
def child(config: ChildConfig, parent: int) -> int:
    return parent * config.factor


def test_internals_still_work() -> None:
    probe = _Probe()
    with DagsterInstance.ephemeral() as instance:
        result = materialize([parent, child], instance=instance,
                             resources={"io_manager": probe},
                             run_config={"ops": {"child": {"config": {"factor": 3}}}})
        assert result.success
        record = instance.fetch_materializations(AssetKey("child"), limit=1).records[0]
        tags = record.event_log_entry.asset_materialization.tags
    assert tags[DATA_VERSION_TAG] == "v-123"
    assert tags[DATA_VERSION_IS_USER_PROVIDED_TAG] == "true"
    assert probe.seen["identity"] == (result.run_id, "child")
    assert probe.seen["consumers"] == [AssetKey("child")]
    assert probe.seen["metadata"]["owner"] == "me"
    assert probe.seen["config:child"] == {"factor": 3}
    assert probe.seen["config:parent"] == {}
