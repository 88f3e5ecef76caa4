"""Units: one parser for sizes, rates and times, with exact conversions and clear refusals."""

import pytest

from heterosim.units import format_size, parse_rate, parse_size, parse_size_range, parse_time_ns


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4KiB", 4096),
        ("1GiB", 2**30),
        ("1MB", 10**6),
        ("64MiB", 64 * 2**20),
        (512, 512),
        ("1.5KiB", 1536),
        ("2 GB", 2 * 10**9),
    ],
)
def test_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("400Gbps", 400e9), ("100Gb/s", 100e9), ("900GB/s", 7.2e12), ("450GB/s", 3.6e12), ("25Mbps", 25e6)],
)
def test_rates_are_bits_per_second(text, expected):
    assert parse_rate(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2us", 2000), ("1ms", 10**6), ("1s", 10**9), ("500ns", 500), ("1.5us", 1500), ("3µs", 3000)],
)
def test_times_are_nanoseconds(text, expected):
    assert parse_time_ns(text) == expected


@pytest.mark.parametrize("bad", ["400", "fast", "4 parsecs", "-1us"])
def test_time_refusals(bad):
    with pytest.raises(ValueError):
        parse_time_ns(bad)


@pytest.mark.parametrize("bad", ["400", "400Gbpz", "0Gbps", True])
def test_rate_refusals(bad):
    with pytest.raises(ValueError):
        parse_rate(bad)


def test_size_range_is_powers_of_two_inclusive():
    assert parse_size_range("1KiB..8KiB") == [1024, 2048, 4096, 8192]
    assert parse_size_range("1MiB") == [2**20]
    with pytest.raises(ValueError):
        parse_size_range("8KiB..1KiB")


def test_format_size_round_trips():
    for size in (1024, 2**20, 3 * 2**30, 1536):
        assert parse_size(format_size(size)) == size
