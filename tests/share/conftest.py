"""Fixtures of the share-group tests."""

import pytest

from tests.share.share_members import compile_worker


@pytest.fixture(scope="module")
def worker_program(tmp_path_factory):
    return compile_worker(tmp_path_factory.mktemp("share-worker"))
