import pytest

from cluster import Cluster


@pytest.fixture
def cluster_factory(tmp_path):
    made = []

    def make(servers, workers, **kw):
        c = Cluster(tmp_path / f"c{len(made)}", servers, workers, **kw)
        c.dir.mkdir(parents=True)
        made.append(c)
        return c

    yield make
    for c in made:
        c.kill_all()
