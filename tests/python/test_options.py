"""Options and Manager(**options) without a GPU: fields, the environment, keyword validation."""

from __future__ import annotations

import gpuxfer
import pytest


def test_defaults_match_the_cpp_struct():
    o = gpuxfer.Options()
    assert o.devices == [] and o.min_devices == 1
    assert o.enable_peer_access and o.enable_nccl
    assert o.pool_limit_bytes == 16 << 30 and o.chunk_bytes == 8 << 20
    assert 1 <= o.host_threads <= 16
    assert o.numa == gpuxfer.NumaPlacement.automatic
    assert o.capture_copy_kernels
    assert "chunk_bytes=8388608" in repr(o) and "capture_copy_kernels=True" in repr(o)


def test_from_env_reads_the_variables(monkeypatch):
    monkeypatch.setenv("GPUXFER_CHUNK_BYTES", "4MiB")
    monkeypatch.setenv("GPUXFER_DEVICES", "1,0")
    o = gpuxfer.Options.from_env()
    assert o.chunk_bytes == 4 << 20 and o.devices == [1, 0]


def test_a_bad_variable_names_itself(monkeypatch):
    monkeypatch.setenv("GPUXFER_POOL_LIMIT", "lots")
    with pytest.raises(gpuxfer.InvalidOptionError, match="GPUXFER_POOL_LIMIT") as caught:
        gpuxfer.Manager(min_devices=0)
    assert caught.value.code == "invalid_option"


def test_keywords_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("GPUXFER_CHUNK_BYTES", "4MiB")
    monkeypatch.setenv("GPUXFER_HOST_THREADS", "3")
    monkeypatch.setenv("GPUXFER_CAPTURE_KERNELS", "0")
    m = gpuxfer.Manager(min_devices=0, chunk_bytes="2MiB", numa="off", pool_limit_bytes=1 << 30)
    assert m.options.chunk_bytes == 2 << 20
    assert m.options.host_threads == 3  # not given: the environment's
    assert m.options.numa == gpuxfer.NumaPlacement.off
    assert m.options.pool_limit_bytes == 1 << 30
    assert not m.options.capture_copy_kernels  # the environment's
    assert gpuxfer.Manager(min_devices=0, capture_copy_kernels=True).options.capture_copy_kernels


def test_keywords_and_the_environment_are_validated_together(monkeypatch):
    # 16 MiB alone is below 4 chunks of the default 8 MiB; with the 4 MiB chunks given it is enough.
    monkeypatch.setenv("GPUXFER_POOL_LIMIT", "16MiB")
    m = gpuxfer.Manager(min_devices=0, chunk_bytes="4MiB")
    assert m.options.pool_limit_bytes == 16 << 20 and m.options.chunk_bytes == 4 << 20
    # A variable whose field a keyword sets is not read at all.
    monkeypatch.setenv("GPUXFER_HOST_THREADS", "many")
    assert gpuxfer.Manager(min_devices=0, chunk_bytes="4MiB", host_threads=2).options.host_threads == 2
    with pytest.raises(gpuxfer.InvalidOptionError, match="GPUXFER_HOST_THREADS"):
        gpuxfer.Manager(min_devices=0, chunk_bytes="4MiB")


def test_an_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'chunk_size'"):
        gpuxfer.Manager(min_devices=0, chunk_size=1)


def test_a_keyword_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match=r"Manager\(enable_nccl=\[1\]\): enable_nccl takes True or False"):
        gpuxfer.Manager(min_devices=0, enable_nccl=[1])


@pytest.mark.parametrize(
    "options, what",
    [
        ({"min_devices": -1}, "min_devices"),
        ({"chunk_bytes": 0}, "chunk_bytes"),
        ({"chunk_bytes": "eight"}, "eight"),
        ({"numa": "sometimes"}, "sometimes"),
        ({"devices": [0, 0]}, "devices"),
    ],
)
def test_values_out_of_range_are_invalid_options(options, what):
    with pytest.raises(gpuxfer.InvalidOptionError, match=what) as caught:
        gpuxfer.Manager(**{"min_devices": 0, **options})
    assert caught.value.code == "invalid_option"


def test_parse_size_is_the_environments():
    assert gpuxfer.parse_size("4GiB") == 4 << 30
    assert gpuxfer.parse_size("512M") == 512 << 20
    with pytest.raises(gpuxfer.InvalidOptionError):
        gpuxfer.parse_size("4 parsecs")
