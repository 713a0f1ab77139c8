"""Fixtures of the share-group tests."""

import pytest

from tests.share.share_members import compile_worker


@pytest.fixture(scope="module")
def worker_program(tmp_path_factory):
    return compile_worker(tmp_path_factory.mktemp("share-worker"))


@pytest.fixture(scope="module", params=["java", "librdkafka"])
def client(request, tmp_path_factory):
    """The share consumer to run: the Java client's (compiled ShareWorker) or librdkafka's
    (None)."""
    if request.param == "librdkafka":
        return None
    return compile_worker(tmp_path_factory.mktemp("share-worker"))
