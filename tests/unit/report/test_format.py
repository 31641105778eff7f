"""Number formats and shades of the report: contrast is checked with the WCAG formula written out here."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ableaudit.report import format as fmt


def wcag_luminance(hex_colour: str) -> float:
    r, g, b = (int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def ratio(a: str, b: str) -> float:
    hi, lo = sorted((wcag_luminance(a), wcag_luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("value", list(np.linspace(0, 100, 101)))
def test_every_rate_shade_keeps_aa_contrast_with_its_text(value):
    shade = fmt.rate_colour(value)
    assert ratio(shade, fmt.ink_for(shade)) >= 4.5


@pytest.mark.parametrize("value", list(np.linspace(-60, 60, 121)))
def test_every_change_shade_keeps_aa_contrast_with_its_text(value):
    shade = fmt.change_colour(value)
    assert ratio(shade, fmt.ink_for(shade)) >= 4.5


def test_rate_shades_darken_as_the_rate_grows():
    lum = [wcag_luminance(fmt.rate_colour(v)) for v in range(0, 101, 10)]
    assert all(a > b for a, b in itertools.pairwise(lum))
    assert fmt.rate_colour(None) is None and fmt.rate_colour(float("nan")) is None
    assert fmt.rate_colour(150) == fmt.rate_colour(100) and fmt.rate_colour(-5) == fmt.rate_colour(
        0
    )


def test_change_shades_tell_the_sign_apart():
    assert fmt.change_colour(0) != fmt.change_colour(-20) != fmt.change_colour(20)
    assert wcag_luminance(fmt.change_colour(0)) > 0.8  # near white for no change


@pytest.mark.parametrize(
    ("func", "value", "text"),
    [
        (fmt.pct, 12.345, "12.3"),
        (fmt.pct, None, "n/a"),
        (fmt.pct, math.nan, "n/a"),
        (fmt.pvalue, 0.0004, "< 0.001"),
        (fmt.pvalue, 0.04567, "0.046"),
        (fmt.pvalue, None, "n/a"),
        (fmt.signed, -0.5, "\u22120.50"),
        (fmt.signed, 2, "+2.00"),
        (fmt.signed, -0.001, "+0.00"),
        (fmt.number, -0.0001, "0.00"),
        (fmt.count, 7.0, "7"),
        (fmt.threshold, 0.05, "0.05"),
    ],
)
def test_formats(func, value, text):
    assert func(value) == text


def test_interval():
    assert fmt.interval(-1.234, 0.5) == "[\u22121.23, +0.50]"
    assert fmt.interval(None, 1) == "n/a"


def test_contrast_matches_the_wcag_formula():
    for a, b in (("#000000", "#ffffff"), ("#767676", "#ffffff"), ("#00224e", "#fee838")):
        assert fmt.contrast(a, b) == pytest.approx(ratio(a, b))
    assert fmt.contrast("#000000", "#ffffff") == pytest.approx(21.0)
