"""Fixtures shared by several test files."""

import pytest
import torch


@pytest.fixture
def one_thread():
    """Tiny models gain nothing from threads, and oversubscribed cores make them crawl."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
