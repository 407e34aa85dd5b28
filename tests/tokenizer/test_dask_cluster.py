"""Reaching a Dask cluster: an address that answers, one that does not, and a local cluster."""

from __future__ import annotations

import pytest

from tokembed.errors import TokenizerError
from tokembed.tokenizer.dask_cluster import connect_cluster


def test_an_address_where_nothing_answers_is_coded() -> None:
    with pytest.raises(TokenizerError) as info, connect_cluster("tcp://127.0.0.1:1", 1):
        pass
    assert info.value.code == "SCHEDULER_UNREACHABLE"
    assert info.value.value == "tcp://127.0.0.1:1"


def test_a_running_scheduler_is_used() -> None:
    from distributed import LocalCluster

    with (
        LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster,
        connect_cluster(cluster.scheduler_address, 1) as client,
    ):
        assert client.submit(sum, [1, 2, 3]).result() == 6
