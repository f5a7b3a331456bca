"""Reading Prometheus exposition text in tests: every sample keyed by name and label set.

:func:`parse_samples` turns a scrape (or ``generate_latest`` output) into a dict
``(name, frozenset(labels)) -> value``; :func:`pick` lists the values of one metric whose labels
include the given ones, :func:`total` sums them (0 when there is none).
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Samples", "parse_samples", "pick", "total"]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse_samples(text: str) -> Samples:
    """Every sample of the exposition ``text``: (name, labels) -> value."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def pick(samples: Samples, name: str, **labels: str) -> list[float]:
    """The values of ``name``'s samples whose labels include ``labels``."""
    wanted = set(labels.items())
    return [v for (n, ls), v in samples.items() if n == name and wanted <= ls]


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (0 when there is none)."""
    return sum(pick(samples, name, **labels))
