"""available_cores: the affinity mask, and a cgroup's CPU quota where one is
set (a container's `--cpus`, a Kubernetes CPU limit), which the affinity
mask does not show: a pool there started a worker per host core."""
import os

import pytest

from shoal.pool import native
from shoal.pool.native import available_cores, cgroup_cpu_quota


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def test_cgroup_v2_quota_of_the_cgroup_and_the_ones_above(tmp_path):
    root = tmp_path / "cgroup"
    write(root / "cgroup.controllers", "cpu memory\n")
    write(root / "kubepods" / "cpu.max", "max 100000\n")
    write(root / "kubepods" / "pod1" / "cpu.max", "250000 100000\n")   # 2.5 cores
    write(root / "kubepods" / "pod1" / "ctr" / "cpu.max", "max 100000\n")
    write(tmp_path / "self", "0::/kubepods/pod1/ctr\n")
    assert cgroup_cpu_quota(str(root), str(tmp_path / "self")) == 2.5
    # a tighter limit above wins
    write(root / "kubepods" / "cpu.max", "150000 100000\n")
    assert cgroup_cpu_quota(str(root), str(tmp_path / "self")) == 1.5


def test_cgroup_v2_in_a_container_namespace_and_without_quota(tmp_path):
    root = tmp_path / "cgroup"
    write(root / "cgroup.controllers", "cpu\n")
    write(root / "cpu.max", "max 100000\n")
    write(tmp_path / "self", "0::/\n")
    assert cgroup_cpu_quota(str(root), str(tmp_path / "self")) is None
    write(root / "cpu.max", "100000 100000\n")
    assert cgroup_cpu_quota(str(root), str(tmp_path / "self")) == 1.0


def test_cgroup_v1_cfs_quota(tmp_path):
    root = tmp_path / "cgroup"
    write(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "300000\n")
    write(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_period_us", "100000\n")
    write(root / "cpu,cpuacct" / "cpu.cfs_quota_us", "-1\n")
    write(root / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    write(tmp_path / "self", "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n")
    assert cgroup_cpu_quota(str(root), str(tmp_path / "self")) == 3.0
    write(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "-1\n")
    assert cgroup_cpu_quota(str(root), str(tmp_path / "self")) is None


def test_cgroup_v1_mount_named_the_other_way_and_a_deleted_v2_cgroup(tmp_path):
    root = tmp_path / "cgroup"
    write(root / "cpuacct,cpu" / "cpu.cfs_quota_us", "200000\n")
    write(root / "cpuacct,cpu" / "cpu.cfs_period_us", "100000\n")
    write(tmp_path / "self", "3:cpu,cpuacct:/\n")
    assert cgroup_cpu_quota(str(root), str(tmp_path / "self")) == 2.0
    v2 = tmp_path / "v2"
    write(v2 / "cgroup.controllers", "cpu\n")
    write(v2 / "a" / "cpu.max", "200000 100000\n")
    write(tmp_path / "self2", "0::/a/b (deleted)\n")
    assert cgroup_cpu_quota(str(v2), str(tmp_path / "self2")) == 2.0
    write(tmp_path / "self3", "0::/../../elsewhere\n")   # outside the namespace: its root's files
    write(v2 / "cpu.max", "300000 100000\n")
    assert cgroup_cpu_quota(str(v2), str(tmp_path / "self3")) == 3.0


@pytest.mark.parametrize("text", ["", "garbage\n", "0::/x\n", "3:cpu:/x\n"])
def test_unreadable_or_missing_cgroup_files_mean_no_quota(tmp_path, text):
    write(tmp_path / "self", text)
    assert cgroup_cpu_quota(str(tmp_path / "nothing"), str(tmp_path / "self")) is None
    assert cgroup_cpu_quota(str(tmp_path), str(tmp_path / "missing")) is None


def test_available_cores_takes_the_quota_rounded_up(monkeypatch):
    affinity = len(os.sched_getaffinity(0))
    monkeypatch.setattr(native, "cgroup_cpu_quota", lambda: None)
    assert available_cores() == affinity
    monkeypatch.setattr(native, "cgroup_cpu_quota", lambda: 0.5)
    assert available_cores() == 1
    monkeypatch.setattr(native, "cgroup_cpu_quota", lambda: affinity + 7.0)   # the mask is tighter
    assert available_cores() == affinity
    if affinity >= 2:
        monkeypatch.setattr(native, "cgroup_cpu_quota", lambda: affinity - 1.5)
        assert available_cores() == affinity - 1


def test_torchrun_ranks_share_the_quota_too(monkeypatch):
    from shoal import distributed

    monkeypatch.setattr(native, "cgroup_cpu_quota", lambda: 1.0)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert distributed.planned_cores_per_rank() == 1
